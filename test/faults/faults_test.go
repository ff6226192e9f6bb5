package faults

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/test/outage"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

const (
	// burstSize pods are created per fault, one every burstInterval; the
	// fault strikes once burstStrike of them are bound, so the rest are
	// created, queued or being bound while it lasts.
	burstSize     = 16
	burstInterval = 50 * time.Millisecond
	burstStrike   = 4
	// etcdDown and apiserverDown are how long each stays down; cutFor is
	// how long the leader's connections stay refused: less than the renew
	// deadline, so the leader can keep its Lease.
	etcdDown      = 3 * time.Second
	apiserverDown = 2 * time.Second
	cutFor        = 2 * time.Second
)

// figure is what one fault cost.
type figure struct {
	fault string
	// pods is how many pods the fault's step created (the burst, the
	// two held for a decision, the probe).
	pods int
	// lasted is from the fault's start to its end (the process started
	// again, SIGCONT, the proxy restored).
	lasted time.Duration
	// recovery is from the fault's end to the probe pod, created after
	// it, seen bound: scheduling progressing again.
	recovery time.Duration
	// drained is from the fault's end until every pod of the burst was
	// seen bound.
	drained time.Duration
	detail  string
}

var _ = Describe("Faults mid-burst", Ordered, func() {
	var figures []figure

	BeforeAll(func() {
		steadyLeader()
		// A pod no node can take stays pending with its reason through
		// every fault.
		createRetrying(testenv.Pod(namespace, "too-big", schedulerName, "64", podMemory))
	})

	AfterAll(func() {
		var table bytes.Buffer
		tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "fault\tpods\tlasted s\tfault end→probe bound s\tfault end→burst bound s\tdetail")
		for _, f := range figures {
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%s\n", f.fault, f.pods, f.lasted.Seconds(), f.recovery.Seconds(), f.drained.Seconds(), f.detail)
		}
		_ = tw.Flush()
		fmt.Fprintf(&table, "%d pods seen bound, %d replica restarts after lost leases; load average %s\n", watch.Bound(), restarts, testenv.LoadAverage())
		GinkgoWriter.Print(table.String())
		AddReportEntry("fault figures", table.String())
	})

	// restart kills a control-plane process once a burst is under way,
	// with a decision made on each of two held pods just before, and starts
	// it again after down.
	restart := func(step, fault string, proc *testenv.ControlPlaneProcess, down time.Duration, detail string) {
		steadyLeader()
		approve, reject := heldForDecision(step)
		names, created := burst(step, burstSize)
		struck(names)
		decide(approve, schedulingv1alpha1.DecisionApprove)
		decide(reject, schedulingv1alpha1.DecisionReject)

		start := time.Now()
		Expect(proc.Kill()).To(Succeed())
		time.Sleep(down)
		Expect(proc.Start()).To(Succeed())
		figures = append(figures, recovered(fault, start, names, created, detail))

		honoured(approve, reject)
		invariantsHold()
	}

	It("restarts etcd and honours the decisions made just before", func() {
		restart("etcd", "etcd killed, restarted", etcd, etcdDown, fmt.Sprintf("down %v", etcdDown))
	})

	It("restarts kube-apiserver and honours the decisions made just before", func() {
		restart("apiserver", "kube-apiserver killed, restarted", apiserver, apiserverDown, fmt.Sprintf("down %v, then its own start", apiserverDown))
	})

	It("pauses the leader past its Lease and honours the decisions made meanwhile", func() {
		steadyLeader()
		approve, reject := heldForDecision("pause")
		names, created := burst("pause", burstSize)
		struck(names)
		// The leader of this moment, in case the Lease moved meanwhile.
		leader, holder := steadyLeader()

		start := time.Now()
		Expect(leader.Pause()).To(Succeed())
		resumed := false
		DeferCleanup(func() {
			if !resumed {
				_ = leader.Resume()
			}
		})
		// Decided while the leader, which holds both pods, runs no code.
		decide(approve, schedulingv1alpha1.DecisionApprove)
		decide(reject, schedulingv1alpha1.DecisionReject)
		var acquired time.Time
		Eventually(func(g Gomega) {
			lease, err := cs.CoordinationV1().Leases(namespace).Get(ctx, leaseName, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
			g.Expect(*lease.Spec.HolderIdentity).NotTo(Equal(holder))
			g.Expect(lease.Spec.AcquireTime).NotTo(BeNil())
			acquired = lease.Spec.AcquireTime.Time
		}).Should(Succeed(), "another replica takes the Lease over")
		// Keep the old leader paused until the new one schedules.
		var first outage.Binding
		Eventually(func() bool {
			var ok bool
			first, ok = watch.FirstBindingAfter(acquired)
			return ok
		}).Should(BeTrue(), "the new leader binds a pod")
		Expect(leader.Resume()).To(Succeed())
		resumed = true
		cont := time.Now()
		f := recovered("leader paused past its Lease", start, names, created, "")
		// Resumed, the old leader acts on its stale view until a renewal
		// of the Lease fails, which client-go reports only once its renew
		// deadline has passed; then it must give up and exit.
		Eventually(leader.Exited).WithTimeout(renewDeadline+time.Minute).Should(BeTrue(), "the old leader exits, its Lease lost")
		// Until then its Lease fence keeps it from writing: none of its
		// stale bindings reaches the API server (which would refuse one
		// the new leader made, and accept one it had not made yet), and
		// the new leader never finds its WaitingPod statuses rewritten.
		Expect(leader.LogLines(cont, "already assigned to node")).To(BeZero(), "stale bindings the old leader sent after SIGCONT")
		for _, r := range replicas {
			if r != leader {
				Expect(r.LogLines(cont, "Restoring WaitingPod status changed by someone else")).To(BeZero(), "WaitingPod statuses the old leader rewrote after SIGCONT")
			}
		}
		fenced, err := leader.LogLines(cont, "not sent: this replica has not renewed its leader Lease")
		Expect(err).NotTo(HaveOccurred())
		f.detail = fmt.Sprintf("new leader's first binding %.2fs after SIGSTOP; the old one exited %.2fs after SIGCONT, its fence holding back %d writes meanwhile",
			first.At.Sub(start).Seconds(), leader.ExitedAt().Sub(cont).Seconds(), fenced)
		figures = append(figures, f)

		honoured(approve, reject)
		invariantsHold()
	})

	It("drops the leader's connections and honours the decisions made meanwhile", func() {
		steadyLeader()
		approve, reject := heldForDecision("cut")
		names, created := burst("cut", burstSize)
		struck(names)
		leader, _ := steadyLeader()
		p := proxyOf(leader)

		start := time.Now()
		dropped := p.drop()
		decide(approve, schedulingv1alpha1.DecisionApprove)
		decide(reject, schedulingv1alpha1.DecisionReject)
		time.Sleep(max(0, cutFor-time.Since(start)))
		p.restore()
		f := recovered("leader's connections dropped", start, names, created, "")
		kept := "kept"
		if !leader.Running() || !leader.Leads(ctx, leaseName) {
			kept = "lost"
		}
		f.detail = fmt.Sprintf("%d connections reset, new ones refused for %v; the leader %s its Lease", dropped, cutFor, kept)
		figures = append(figures, f)

		honoured(approve, reject)
		invariantsHold()
	})

	It("ends with every pod bound or pending with its reason", func() {
		steadyLeader()
		invariantsHold()
		var pods corev1.PodList
		Expect(c.List(ctx, &pods, client.InNamespace(namespace))).To(Succeed())
		var pending []string
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				pending = append(pending, p.Name)
			}
		}
		slices.Sort(pending)
		// The pod too big for any node, and the four rejected.
		Expect(pending).To(Equal([]string{"apiserver-reject", "cut-reject", "etcd-reject", "pause-reject", "too-big"}))
		Expect(scheduledCondition("too-big")).To(HaveField("Message", ContainSubstring("Insufficient cpu")))
	})
})

// burst creates n pods named prefix-NN, one every burstInterval, from a
// goroutine that retries each create while the API server cannot take it;
// created is closed once every one exists.
func burst(prefix string, n int) (names []string, created <-chan struct{}) {
	for i := range n {
		names = append(names, fmt.Sprintf("%s-%02d", prefix, i))
	}
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		for _, name := range names {
			createRetrying(testenv.Pod(namespace, name, schedulerName, podCPU, podMemory))
			time.Sleep(burstInterval)
		}
	}()
	return names, done
}

// struck waits until burstStrike pods of the burst are bound: the moment a
// fault strikes.
func struck(names []string) {
	Eventually(func() int {
		n := 0
		for _, name := range names {
			if _, ok := watch.BindingOf(namespace + "/" + name); ok {
				n++
			}
		}
		return n
	}).Should(BeNumerically(">=", burstStrike))
}

// recovered ends a fault that started at start and ends now: it creates a
// probe pod and waits until it and the whole burst are bound, and returns
// the figures. It reads the pods from the API server rather than the
// watch, whose reconnection after an outage backs off and would add its
// own delay.
func recovered(fault string, start time.Time, names []string, created <-chan struct{}, detail string) figure {
	end := time.Now()
	GinkgoWriter.Printf("%s %s: ended after %v\n", stamp(), fault, end.Sub(start).Round(time.Millisecond))
	probe := testenv.Pod(namespace, strings.Split(names[0], "-")[0]+"-probe", schedulerName, podCPU, podMemory)
	probeCreated := false
	var recovery, drained time.Duration
	Eventually(func(g Gomega) {
		if !probeCreated {
			err := requests.Create(ctx, probe.DeepCopy())
			probeCreated = err == nil || apierrors.IsAlreadyExists(err)
		}
		var pods corev1.PodList
		g.Expect(requests.List(ctx, &pods, client.InNamespace(namespace))).To(Succeed())
		since := time.Since(end)
		nodeOf := map[string]string{}
		for _, p := range pods.Items {
			nodeOf[p.Name] = p.Spec.NodeName
		}
		if recovery == 0 && nodeOf[probe.Name] != "" {
			recovery = since
		}
		if drained == 0 && isClosed(created) && !slices.ContainsFunc(names, func(name string) bool { return nodeOf[name] == "" }) {
			drained = since
		}
		g.Expect(probeCreated).To(BeTrue(), "probe pod %s created", probe.Name)
		g.Expect(recovery).NotTo(BeZero(), "probe pod %s bound", probe.Name)
		g.Expect(drained).NotTo(BeZero(), "every pod of the burst bound")
	}).WithPolling(50*time.Millisecond).Should(Succeed(), "scheduling resumes after %s", fault)
	f := figure{fault: fault, pods: len(names) + 3, lasted: end.Sub(start), recovery: recovery, drained: drained, detail: detail}
	GinkgoWriter.Printf("%s %s: probe bound %.2fs after the fault's end, burst bound by %.2fs\n", stamp(), fault, f.recovery.Seconds(), f.drained.Seconds())
	return f
}

// isClosed tells whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// heldForDecision creates two pods of the approval profile, prefix-approve
// and prefix-reject, and waits until the leader holds both at Permit.
func heldForDecision(prefix string) (approve, reject *corev1.Pod) {
	held := func(name string) *corev1.Pod {
		pod := testenv.Pod(namespace, name, approvalScheduler, podCPU, podMemory)
		createRetrying(pod)
		Eventually(func(g Gomega) {
			var wp schedulingv1alpha1.WaitingPod
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &wp)).To(Succeed())
			g.Expect(wp.Status.PodUID).NotTo(BeEmpty())
			g.Expect(wp.Status.Conditions).To(ContainElement(And(
				HaveField("Type", schedulingv1alpha1.WaitingPodWaiting),
				HaveField("Status", metav1.ConditionTrue),
			)))
			pod.UID = wp.Status.PodUID
		}).Should(Succeed(), "pod %s held for a decision", name)
		return pod
	}
	return held(prefix + "-approve"), held(prefix + "-reject")
}

// decide records decision on pod's WaitingPod as kubectl approve and
// kubectl reject do, pinned to the pod's UID.
func decide(pod *corev1.Pod, decision schedulingv1alpha1.Decision) {
	Eventually(func() error {
		var wp schedulingv1alpha1.WaitingPod
		if err := requests.Get(ctx, client.ObjectKeyFromObject(pod), &wp); err != nil {
			return err
		}
		patch := client.MergeFrom(wp.DeepCopy())
		wp.Spec.PodUID = pod.UID
		wp.Spec.Decision = decision
		wp.Spec.Reason = "decided mid-fault"
		wp.Spec.DecidedBy = decider
		return requests.Patch(ctx, &wp, patch)
	}).Should(Succeed(), "deciding %s for pod %s", decision, pod.Name)
}

// honoured checks that the approved pod was bound and that the rejected one
// is pending with the rejection as its reason and was never bound.
func honoured(approve, reject *corev1.Pod) {
	Eventually(func() bool {
		_, ok := watch.BindingOf(namespace + "/" + approve.Name)
		return ok
	}).Should(BeTrue(), "the approved pod %s is bound", approve.Name)
	Eventually(func() *corev1.PodCondition { return scheduledCondition(reject.Name) }).Should(And(
		HaveField("Status", corev1.ConditionFalse),
		HaveField("Message", ContainSubstring("rejected at Permit by "+decider+": decided mid-fault")),
	), "the rejected pod %s is pending with the rejection", reject.Name)
	b, ok := watch.BindingOf(namespace + "/" + reject.Name)
	Expect(ok).To(BeFalse(), "the rejected pod %s was bound: %+v", reject.Name, b)
}

// scheduledCondition is the pod's PodScheduled condition, nil if it has none.
func scheduledCondition(name string) *corev1.PodCondition {
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &pod); err != nil {
		return nil
	}
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodScheduled {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// invariantsHold checks that no pod was bound twice, no node is
// overcommitted and every pod is bound or pending with a reason.
func invariantsHold() {
	problems, err := outage.Check(ctx, cs, c, namespace, watch)
	Expect(err).NotTo(HaveOccurred())
	Expect(problems).To(BeEmpty(), "invariants broken:\n%s", indent(strings.Join(problems, "\n")))
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(c.List(ctx, &pods, client.InNamespace(namespace))).To(Succeed())
		g.Expect(outage.Unaccounted(pods.Items)).To(BeEmpty())
	}).Should(Succeed(), "every pod bound or pending with a reason")
}
