package deps

import (
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/component-base/metrics"
	_ "k8s.io/component-helpers/resource"
	_ "k8s.io/component-helpers/scheduling/corev1"
	_ "k8s.io/klog/v2"
	_ "k8s.io/kube-scheduler/config/v1"
	_ "k8s.io/kube-scheduler/extender/v1"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
)
