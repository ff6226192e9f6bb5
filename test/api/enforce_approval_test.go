package api_test

import (
	"context"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// The optional policy in config/policy/enforce-approval, installed the way
// docs/approvals.md tells people to: with the real kubectl.
var _ = Describe("The enforce-approval admission policy", Ordered, func() {
	ctx := context.Background()
	const (
		governedLabel      = "scheduling.schedprofiles.io/approval-required"
		profilesAnnotation = "scheduling.schedprofiles.io/approval-profiles"
	)
	var (
		kubectl *testenv.Kubectl
		policy  = filepath.Join(testenv.RepoRoot(), "config", "policy", "enforce-approval")
	)

	namespace := func(name string, labels, annotations map[string]string) string {
		GinkgoHelper()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
		Expect(k8sClient.Create(ctx, ns)).To(Succeed())
		// Without a namespace controller a deleted namespace stays
		// Terminating, so every spec's namespaces have names of their own.
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, ns))).To(Succeed()) })
		return name
	}
	governed := func(name string, annotations map[string]string) string {
		GinkgoHelper()
		return namespace(name, map[string]string{governedLabel: "true"}, annotations)
	}
	newPod := func(ns, name, schedulerName, nodeName string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{
				SchedulerName: schedulerName,
				NodeName:      nodeName,
				Containers:    []corev1.Container{{Name: "c", Image: "registry.example/app"}},
			},
		}
	}
	create := func(pod *corev1.Pod) error {
		err := k8sClient.Create(ctx, pod)
		if err == nil {
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, pod))).To(Succeed()) })
		}
		return err
	}
	expectForbidden := func(err error, message string) {
		GinkgoHelper()
		Expect(err).To(HaveOccurred())
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want a Forbidden error, got %v", err)
		Expect(err.Error()).To(ContainSubstring(message))
	}

	BeforeAll(func() {
		admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
		Expect(err).NotTo(HaveOccurred())
		data, err := admin.KubeConfig()
		Expect(err).NotTo(HaveOccurred())
		path, err := testenv.WriteKubeconfig(GinkgoT().TempDir(), "admin", data)
		Expect(err).NotTo(HaveOccurred())
		kubectl, err = testenv.NewKubectl(path, GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())

		r, err := kubectl.Run("apply", "-k", policy)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Code).To(BeZero(), "kubectl apply: %s", r.Stderr)
		DeferCleanup(func() {
			r, err := kubectl.Run("delete", "-k", policy)
			Expect(err).NotTo(HaveOccurred())
			Expect(r.Code).To(BeZero(), "kubectl delete: %s", r.Stderr)
		})

		// The API server enforces a new policy once its informers have seen
		// it; a dry run goes through admission without leaving a pod behind.
		ns := governed("enforce-warmup", nil)
		Eventually(func() error {
			return k8sClient.Create(ctx, newPod(ns, "warmup", "default-scheduler", ""), client.DryRunAll)
		}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Satisfy(apierrors.IsForbidden))
	})

	It("in a governed namespace refuses a pod of a scheduler that is not an approval profile", func() {
		ns := governed("enforce-scheduler", nil)
		expectForbidden(create(newPod(ns, "other", "bin-packing", "")),
			`namespace enforce-scheduler requires approval: spec.schedulerName must name an approval profile (approvals), not "bin-packing"`)
		// An unset schedulerName is the default scheduler's, which holds nothing.
		expectForbidden(create(newPod(ns, "unset", "", "")),
			`spec.schedulerName must name an approval profile (approvals), not "default-scheduler"`)
	})

	It("in a governed namespace refuses a pod created on a node, even of an approval profile", func() {
		ns := governed("enforce-node", nil)
		expectForbidden(create(newPod(ns, "preset", "approvals", "node-1")),
			"namespace enforce-node requires approval: spec.nodeName must not be set, since a pod created on a node is never scheduled and so never approved")
	})

	It("in a governed namespace admits a pod of an approval profile with no node", func() {
		ns := governed("enforce-compliant", nil)
		Expect(create(newPod(ns, "compliant", "approvals", ""))).To(Succeed())
	})

	It("takes the approval profiles from the namespace's annotation when it has one", func() {
		ns := governed("enforce-custom", map[string]string{profilesAnnotation: "gpu-approvals, ml-approvals"})
		Expect(create(newPod(ns, "gpu", "gpu-approvals", ""))).To(Succeed())
		Expect(create(newPod(ns, "ml", "ml-approvals", ""))).To(Succeed())
		// The annotation replaces the default rather than adding to it.
		expectForbidden(create(newPod(ns, "sample", "approvals", "")),
			`spec.schedulerName must name an approval profile (gpu-approvals, ml-approvals), not "approvals"`)
	})

	It("admits anything in a namespace that is not governed", func() {
		for _, ns := range []string{
			namespace("enforce-unlabelled", nil, nil),
			namespace("enforce-opted-out", map[string]string{governedLabel: "false"}, nil),
		} {
			Expect(create(newPod(ns, "other", "bin-packing", ""))).To(Succeed())
			Expect(create(newPod(ns, "preset", "default-scheduler", "node-1"))).To(Succeed())
		}
	})
})
