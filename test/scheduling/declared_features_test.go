package scheduling_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
)

// restartsAll is a pod whose container restarts every container of the
// pod when it exits with 42: it needs a node whose kubelet declares
// RestartAllContainersOnContainerExits.
func restartsAll(ns, name, schedulerName string) *v1.Pod {
	pod := podSpec(ns, name, schedulerName, "100m")
	never := v1.ContainerRestartPolicyNever
	pod.Spec.Containers[0].RestartPolicy = &never
	pod.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{{
		Action:    v1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
	}}
	return pod
}

// declareFeatures writes the node's status.declaredFeatures, as its kubelet
// does after an upgrade or a downgrade.
func declareFeatures(ctx context.Context, name string, features []string) {
	Eventually(func() error {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.DeclaredFeatures = features
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	}).Should(Succeed())
}

var _ = Describe("Node declared features", func() {
	var ns string

	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		DeferCleanup(func(ctx SpecContext) { cleanUp(ctx, ns) })
	})

	It("places a pod needing a node feature only on a node that declares it", func(ctx SpecContext) {
		fwk := publish(ctx, profile("features"))
		newNode(ctx, "old-kubelet", "4")
		declareFeatures(ctx, "old-kubelet", nil)
		newPod(ctx, restartsAll(ns, "restarts-all", "features"))

		// Upstream's reason; preemption cannot add a feature, and says so.
		const reasons = "0/1 nodes are available: 1 node(s) didn't match Pod's required features."
		message := Equal(reasons)
		if fwk.HasPostFilterPlugins() {
			message = Equal(reasons + " preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
		}
		Eventually(getPod(ctx, ns, "restarts-all")).Should(WithTransform(podScheduledCondition, And(
			Not(BeNil()),
			HaveField("Status", v1.ConditionFalse),
			HaveField("Reason", v1.PodReasonUnschedulable),
			HaveField("Message", message),
		)))
		Eventually(eventNotes(ctx, ns, "restarts-all", "FailedScheduling")).Should(ContainElement(message))

		// Pods that need no feature still go there.
		newPod(ctx, podSpec(ns, "ordinary", "features", "100m"))
		Eventually(getPod(ctx, ns, "ordinary")).Should(WithTransform(nodeName, Equal("old-kubelet")))
		Expect(getPod(ctx, ns, "restarts-all")()).To(WithTransform(nodeName, BeEmpty()))

		newNode(ctx, "new-kubelet", "4")
		Eventually(getPod(ctx, ns, "restarts-all")).WithTimeout(20 * time.Second).Should(WithTransform(nodeName, Equal("new-kubelet")))
	})

	It("retries a pending pod as soon as a node starts declaring what it needs", func(ctx SpecContext) {
		publish(ctx, profile("upgrade"))
		newNode(ctx, "upgraded", "4")
		declareFeatures(ctx, "upgraded", nil)
		newPod(ctx, restartsAll(ns, "waits", "upgrade"))
		Eventually(getPod(ctx, ns, "waits")).Should(WithTransform(podScheduledCondition,
			HaveField("Reason", v1.PodReasonUnschedulable)))

		// Far below the 5-minute flush: the node's declared-feature update
		// moves the pod.
		declareFeatures(ctx, "upgraded", localcluster.KubeletDeclaredFeatures())
		Eventually(getPod(ctx, ns, "waits")).WithTimeout(20 * time.Second).Should(WithTransform(nodeName, Equal("upgraded")))
	})
})
