// Package e2e_test drives the product the way its README and its install
// docs tell people to: `make run-local` and the README's "Try it" commands
// with the real kubectl, and `kubectl apply -k config/default` with the
// operator running under the ServiceAccount and RBAC that it installs.
package e2e_test

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "end-to-end suite")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	logger := zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
})
