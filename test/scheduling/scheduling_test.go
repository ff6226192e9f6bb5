package scheduling_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
)

// newNode creates a Node with cpu allocatable, a Ready condition and the
// features a kubelet of the control plane's version declares, as that
// kubelet would report it.
func newNode(ctx context.Context, name, cpu string, taints ...v1.Taint) *v1.Node {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{Taints: taints}}
	node, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	resources := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse(cpu),
		v1.ResourceMemory: resource.MustParse("32Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	node.Status = v1.NodeStatus{
		Capacity:         resources,
		Allocatable:      resources,
		Conditions:       []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now()}},
		DeclaredFeatures: localcluster.KubeletDeclaredFeatures(),
	}
	node, err = cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	Expect(err).NotTo(HaveOccurred())
	// The API server taints new nodes not-ready; with no node lifecycle
	// controller here, lift the taint as it would for a Ready node.
	var kept []v1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key != v1.TaintNodeNotReady {
			kept = append(kept, t)
		}
	}
	node.Spec.Taints = kept
	node, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return node
}

func podSpec(ns, name, schedulerName, cpu string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.PodSpec{
			SchedulerName: schedulerName,
			Containers: []v1.Container{{
				Name:      "c",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}},
			}},
		},
	}
}

func newPod(ctx context.Context, pod *v1.Pod) *v1.Pod {
	pod, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return pod
}

func newNamespace(ctx context.Context) string {
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sched-"}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return ns.Name
}

// publish builds an instance of p with the loop's dependencies and makes
// it serve under its schedulerName.
func publish(ctx context.Context, p *configv1.KubeSchedulerProfile) framework.Framework {
	fwk, err := profilebuild.Builder(sched)(ctx, p)
	Expect(err).NotTo(HaveOccurred())
	sched.Profiles().Publish(*p.SchedulerName, fwk)
	return fwk
}

func getPod(ctx context.Context, ns, name string) func() (*v1.Pod, error) {
	return func() (*v1.Pod, error) { return cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}) }
}

func nodeName(p *v1.Pod) string { return p.Spec.NodeName }

func podScheduledCondition(p *v1.Pod) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// eventNotes returns the notes of the events with reason about a pod.
func eventNotes(ctx context.Context, ns, podName, reason string) func() ([]string, error) {
	return func() ([]string, error) {
		list, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == podName && e.Reason == reason {
				notes = append(notes, e.Note)
			}
		}
		return notes, nil
	}
}

// cleanUp removes the spec's pods and every node, so specs do not see
// each other's capacity.
func cleanUp(ctx context.Context, ns string) {
	zero := int64(0)
	Expect(cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})).To(Succeed())
	Expect(cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})).To(Succeed())
	Eventually(func() ([]v1.Node, error) {
		l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}).Should(BeEmpty())
}

func counterValue(name string, labels map[string]string) float64 {
	families, err := metricsRegistry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matches(m, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := labels[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

var _ = Describe("The scheduling loop", func() {
	var ns string

	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		DeferCleanup(func(ctx SpecContext) { cleanUp(ctx, ns) })
	})

	It("binds pods to nodes that fit them", func(ctx SpecContext) {
		publish(ctx, profile("fit"))
		for i := 0; i < 3; i++ {
			newNode(ctx, fmt.Sprint("fit-node-", i), "4")
		}
		for i := 0; i < 9; i++ {
			newPod(ctx, podSpec(ns, fmt.Sprint("pod-", i), "fit", "1"))
		}

		perNode := map[string]int{}
		for i := 0; i < 9; i++ {
			name := fmt.Sprint("pod-", i)
			Eventually(getPod(ctx, ns, name)).Should(WithTransform(nodeName, Not(BeEmpty())), "pod %s is not bound", name)
			p, err := getPod(ctx, ns, name)()
			Expect(err).NotTo(HaveOccurred())
			perNode[p.Spec.NodeName]++
			Expect(binds.get(p.UID)).To(Equal(1))
		}
		// 1 CPU each on 4-CPU nodes, spread by the score.
		for node, n := range perNode {
			Expect(n).To(BeNumerically("<=", 4), "node %s holds %d pods", node, n)
		}
		p, err := getPod(ctx, ns, "pod-0")()
		Expect(err).NotTo(HaveOccurred())
		Eventually(eventNotes(ctx, ns, "pod-0", "Scheduled")).Should(ConsistOf(
			fmt.Sprintf("Successfully assigned %s/pod-0 to %s", ns, p.Spec.NodeName)))
		Expect(counterValue("scheduler_schedule_attempts_total", map[string]string{"result": "scheduled", "profile": "fit"})).To(BeNumerically(">=", 9))
	})

	It("reports pods that fit nowhere the way kube-scheduler does", func(ctx SpecContext) {
		fwk := publish(ctx, profile("report"))
		for i := 0; i < 3; i++ {
			newNode(ctx, fmt.Sprint("small-", i), "1")
		}
		for i := 0; i < 2; i++ {
			newNode(ctx, fmt.Sprint("tainted-", i), "8", v1.Taint{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule})
		}
		newPod(ctx, podSpec(ns, "big", "report", "2"))

		// Reasons counted and sorted as upstream's FitError; with
		// preemption in the profile its own verdict follows.
		const reasons = "0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient cpu."
		message := Equal(reasons)
		if fwk.HasPostFilterPlugins() {
			message = HavePrefix(reasons + " preemption: ")
		}
		Eventually(getPod(ctx, ns, "big")).Should(WithTransform(podScheduledCondition, And(
			Not(BeNil()),
			HaveField("Status", v1.ConditionFalse),
			HaveField("Reason", v1.PodReasonUnschedulable),
			HaveField("Message", message),
		)))
		Eventually(eventNotes(ctx, ns, "big", "FailedScheduling")).Should(ContainElement(message))
		Consistently(getPod(ctx, ns, "big")).WithTimeout(2 * time.Second).Should(WithTransform(nodeName, BeEmpty()))
		Expect(counterValue("scheduler_schedule_attempts_total", map[string]string{"result": "unschedulable", "profile": "report"})).To(BeNumerically(">=", 1))
	})

	It("adds what PostFilter found to the message and records its nomination", func(ctx SpecContext) {
		p := profile("post-filter")
		// Only the test plugin, not the default profile's preemption.
		p.Plugins.PostFilter = configv1.PluginSet{
			Enabled:  []configv1.Plugin{{Name: nominatorName}},
			Disabled: []configv1.Plugin{{Name: "*"}},
		}
		publish(ctx, p)
		newNode(ctx, "full", "1")
		newPod(ctx, podSpec(ns, "wants-more", "post-filter", "2"))
		const want = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
		Eventually(getPod(ctx, ns, "wants-more")).Should(And(
			WithTransform(podScheduledCondition, HaveField("Message", want)),
			HaveField("Status.NominatedNodeName", "full"),
		))
		Eventually(eventNotes(ctx, ns, "wants-more", "FailedScheduling")).Should(ContainElement(want))
	})

	It("schedules pending pods on a node added later without waiting for the periodic flush", func(ctx SpecContext) {
		publish(ctx, profile("late-node"))
		newNode(ctx, "too-small", "1")
		for i := 0; i < 3; i++ {
			newPod(ctx, podSpec(ns, fmt.Sprint("waiting-", i), "late-node", "2"))
		}
		for i := 0; i < 3; i++ {
			Eventually(getPod(ctx, ns, fmt.Sprint("waiting-", i))).Should(WithTransform(podScheduledCondition,
				HaveField("Reason", v1.PodReasonUnschedulable)))
		}
		newNode(ctx, "big-enough", "8")
		// Far below the 5-minute flush: the Node/Add event moves them.
		for i := 0; i < 3; i++ {
			Eventually(getPod(ctx, ns, fmt.Sprint("waiting-", i))).WithTimeout(20 * time.Second).
				Should(WithTransform(nodeName, Equal("big-enough")))
		}
	})

	It("holds gated pods until their gates are lifted", func(ctx SpecContext) {
		publish(ctx, profile("gates"))
		newNode(ctx, "gates-node", "4")
		pod := podSpec(ns, "gated", "gates", "1")
		pod.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/wait"}}
		newPod(ctx, pod)
		Consistently(getPod(ctx, ns, "gated")).WithTimeout(2 * time.Second).Should(WithTransform(nodeName, BeEmpty()))
		Expect(eventNotes(ctx, ns, "gated", "FailedScheduling")()).To(BeEmpty())

		Eventually(func() error {
			p, err := getPod(ctx, ns, "gated")()
			if err != nil {
				return err
			}
			p.Spec.SchedulingGates = nil
			_, err = cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
			return err
		}).Should(Succeed())
		Eventually(getPod(ctx, ns, "gated")).Should(WithTransform(nodeName, Equal("gates-node")))
	})

	It("retries a pod at once when its own update adds the toleration it lacked", func(ctx SpecContext) {
		publish(ctx, profile("tolerations"))
		newNode(ctx, "tainted-node", "4", v1.Taint{Key: "dedicated", Value: "batch", Effect: v1.TaintEffectNoSchedule})
		newPod(ctx, podSpec(ns, "intolerant", "tolerations", "1"))
		Eventually(getPod(ctx, ns, "intolerant")).Should(WithTransform(podScheduledCondition,
			HaveField("Reason", v1.PodReasonUnschedulable)))

		Eventually(func() error {
			p, err := getPod(ctx, ns, "intolerant")()
			if err != nil {
				return err
			}
			p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "batch", Effect: v1.TaintEffectNoSchedule})
			_, err = cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
			return err
		}).Should(Succeed())
		// Far below the 5-minute flush: the pod's own update is a TargetPod
		// event, which TaintToleration registers (kube-scheduler 1.37.2).
		Eventually(getPod(ctx, ns, "intolerant")).WithTimeout(20 * time.Second).
			Should(WithTransform(nodeName, Equal("tainted-node")))
	})

	It("picks up the pending pods of a profile published after them", func(ctx SpecContext) {
		newNode(ctx, "later-node", "4")
		newPod(ctx, podSpec(ns, "early", "published-later", "1"))
		Consistently(getPod(ctx, ns, "early")).WithTimeout(2 * time.Second).Should(WithTransform(nodeName, BeEmpty()))
		publish(ctx, profile("published-later"))
		Eventually(getPod(ctx, ns, "early")).Should(WithTransform(nodeName, Equal("later-node")))
	})

	It("loses no pod and binds none twice while the instance is swapped under 200 pods", func(ctx SpecContext) {
		const name, numPods = "swap", 200
		publish(ctx, profile(name))
		for i := 0; i < 10; i++ {
			newNode(ctx, fmt.Sprint("swap-node-", i), "100")
		}

		var wg sync.WaitGroup
		swapping := make(chan struct{})
		wg.Add(1)
		swaps := 0
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			for {
				select {
				case <-swapping:
					return
				case <-time.After(10 * time.Millisecond):
					publish(ctx, profile(name))
					swaps++
				}
			}
		}()
		created := make(chan *v1.Pod, numPods)
		for w := 0; w < 10; w++ {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				for i := w; i < numPods; i += 10 {
					created <- newPod(ctx, podSpec(ns, fmt.Sprint("swap-", i), name, "100m"))
				}
			}()
		}

		Eventually(func() (int, error) {
			l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return 0, err
			}
			bound := 0
			for _, p := range l.Items {
				if p.Spec.NodeName != "" {
					bound++
				}
			}
			return bound, nil
		}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Equal(numPods))
		close(swapping)
		wg.Wait()
		close(created)
		Expect(swaps).To(BeNumerically(">", 3), "the instance was not swapped while pods were scheduled")

		for p := range created {
			Expect(binds.get(p.UID)).To(Equal(1), "pod %s was bound %d times", p.Name, binds.get(p.UID))
		}
		// Every replaced instance is closed once its last cycle released it.
		Eventually(sched.Profiles().Retiring).Should(BeZero())
	})

	It("hands pods held at Permit over to the next leader when it stops, binding none twice", func(ctx SpecContext) {
		const name = "handover"
		// A second scheduler plays the leader that steps down.
		leaderCtx, stepDown := context.WithCancel(klog.NewContext(ctx, GinkgoLogr))
		defer stepDown()
		leader, err := scheduler.New(leaderCtx, cs, registry(), scheduler.WithDefaultPlugins(plugins.DefaultPlugins()))
		Expect(err).NotTo(HaveOccurred())
		stopped := make(chan error, 1)
		go func() { stopped <- leader.Start(leaderCtx) }()
		p := profile(name)
		p.Plugins.Permit.Enabled = []configv1.Plugin{{Name: holdName}}
		fwk, err := profilebuild.Builder(leader)(ctx, p)
		Expect(err).NotTo(HaveOccurred())
		leader.Profiles().Publish(name, fwk)

		newNode(ctx, "handover-node", "8")
		var held []*v1.Pod
		for i := 0; i < 3; i++ {
			newPod(ctx, podSpec(ns, fmt.Sprint("free-", i), name, "100m"))
			pod := podSpec(ns, fmt.Sprint("held-", i), name, "100m")
			pod.Labels = map[string]string{"hold": "true"}
			held = append(held, newPod(ctx, pod))
		}
		for i := 0; i < 3; i++ {
			Eventually(getPod(ctx, ns, fmt.Sprint("free-", i))).Should(WithTransform(nodeName, Equal("handover-node")))
		}
		for _, pod := range held {
			Eventually(func() framework.WaitingPod { wp, _ := leader.Profiles().GetWaitingPod(pod.UID); return wp }).ShouldNot(BeNil())
		}

		stepDown()
		Eventually(stopped).Should(Receive(BeNil()))
		for _, pod := range held {
			Expect(getPod(ctx, ns, pod.Name)()).To(WithTransform(nodeName, BeEmpty()))
			Expect(binds.get(pod.UID)).To(BeZero())
		}

		// The next leader serves the profile, without the hold, and binds them once.
		publish(ctx, profile(name))
		for _, pod := range held {
			Eventually(getPod(ctx, ns, pod.Name)).Should(WithTransform(nodeName, Equal("handover-node")))
			Expect(binds.get(pod.UID)).To(Equal(1))
		}
	})
})
