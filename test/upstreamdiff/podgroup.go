package upstreamdiff

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	upstreamscheduler "k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/profile"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// groupSide is a whole scheduler, kube-scheduler 1.37.2's or
// profile-scheduler's, running its loop over its own fake clientset, for
// the pod-group comparison: the pod-group cycle is the scheduler's, not
// the framework's, so the harness sees what the loop writes through the
// API (bindings, conditions, nominations, evictions) and what it logs of
// the placements it scored.
type groupSide struct {
	client    *fake.Clientset
	deletions deletions
	scores    *placementScores
	// actions counts the clientset's actions, to tell when the loop has
	// gone quiet.
	mu      sync.Mutex
	actions int
	cancel  context.CancelFunc
	done    chan struct{}
}

// placementScoreMessage is what both schedulers log, at V(10), for each
// placement they scored in a pod-group cycle.
const placementScoreMessage = "Calculated placement's final score for podGroup"

// podGroupCycleMessage starts a pod-group cycle, at V(3), and
// assumePlacementMessage starts the cycle's try of one placement, at
// V(4), on both sides.
const (
	podGroupCycleMessage   = "Attempting to schedule pod group"
	assumePlacementMessage = "Assuming placement in snapshot"
)

// podCycleMessage starts a single pod's cycle, at V(3), and
// queueMoveMessage is part of every message, at V(3) or V(5), that says
// the queue moved a pod or a pod group ("entity"): its "queue" says where
// to, "Backoff" upstream, "backoff" ours.
const (
	podCycleMessage  = "Attempting to schedule pod"
	queueMoveMessage = "moved to an internal scheduling queue"
)

// placementScores is a log sink that keeps the placements' final scores
// (placementGenerate's placements, as placementScore scored them), what
// each group's latest pod-group cycle tried, and a count of the messages;
// it drops the messages themselves.
type placementScores struct {
	mu    sync.Mutex
	lines []string
	// messages counts every message logged, at any level: a scheduler
	// busy in a cycle logs, at V(4) and beyond, many times a millisecond.
	messages int
	// cycles are the latest pod-group cycle of each group, by
	// namespace/name.
	cycles map[string]*groupCycle
	// backedOff are the pods and pod groups, by namespace/name, that the
	// queue moved to its backoff queue since their last cycle, with when:
	// they are tried again once their backoff ends. retried counts the
	// cycles that tried one of them again.
	backedOff map[string]time.Time
	retried   int
	// kv are the logger's values, on a sink WithValues made; root is
	// the sink they were made from, which keeps what is logged.
	kv   []any
	root *placementScores
}

func (*placementScores) Init(logr.RuntimeInfo) {}
func (*placementScores) Enabled(int) bool      { return true }
func (*placementScores) Error(error, string, ...any) {
}
func (p *placementScores) WithValues(kv ...any) logr.LogSink {
	r := p.root
	if r == nil {
		r = p
	}
	return &placementScores{root: r, kv: append(slices.Clone(p.kv), kv...)}
}
func (p *placementScores) WithName(string) logr.LogSink { return p }

func (p *placementScores) Info(_ int, msg string, kv ...any) {
	if p.root != nil {
		p.root.info(msg, append(slices.Clone(p.kv), kv...)...)
		return
	}
	p.info(msg, kv...)
}

func (p *placementScores) info(msg string, kv ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.messages++
	// Upstream names the group in the call, ours in the logger's
	// values: kv holds both, the call's last.
	var group, placement, score, pod, entity, queue any
	for i := 0; i+1 < len(kv); i += 2 {
		switch kv[i] {
		case "podGroup":
			group = kv[i+1]
		case "placement":
			placement = kv[i+1]
		case "score":
			score = kv[i+1]
		case "pod":
			pod = kv[i+1]
		case "entity":
			entity = kv[i+1]
		case "queue":
			queue = kv[i+1]
		}
	}
	if strings.Contains(msg, queueMoveMessage) && strings.EqualFold(fmt.Sprint(queue), "backoff") {
		moved := entity
		switch {
		case moved != nil:
		case strings.HasPrefix(msg, "Pod group "):
			moved = group
		default:
			moved = pod
		}
		p.backedOff[fmt.Sprint(moved)] = time.Now()
	}
	c := p.cycles[fmt.Sprint(group)]
	switch msg {
	case podCycleMessage:
		p.retry(fmt.Sprint(pod))
	case placementScoreMessage:
		p.lines = append(p.lines, fmt.Sprintf("%v=%v", placement, score))
	case podGroupCycleMessage:
		p.cycles[fmt.Sprint(group)] = &groupCycle{}
		p.retry(fmt.Sprint(group))
	case assumePlacementMessage:
		if c == nil {
			break
		}
		// A pass tries each placement once: a placement tried again
		// starts the next pass, the preemption's trial.
		if name := fmt.Sprint(placement); c.pass == nil || c.pass[name] {
			c.firstPlacements = append(c.firstPlacements, name)
			c.pass = map[string]bool{name: true}
		} else {
			c.pass[name] = true
		}
	}
}

// groupCycle is what a pod-group cycle tried, as its log shows.
type groupCycle struct {
	// firstPlacements are the placements each pass over the placements
	// tried first, whose failure the pass reports when none fits: the
	// cycle's own pass, then that of pod-group preemption's trial, which
	// runs the group's algorithm again with the victims gone. pass holds
	// the placements the latest pass tried.
	firstPlacements []string
	pass            map[string]bool
}

// take returns the scores logged since the last call and what the
// latest cycle of the group named key (namespace/name) tried, and forgets
// them.
func (p *placementScores) take(key string) ([]string, groupCycle) {
	p.mu.Lock()
	defer p.mu.Unlock()
	scores, c := p.lines, p.cycles[key]
	p.lines, p.cycles = nil, map[string]*groupCycle{}
	if c == nil {
		return scores, groupCycle{}
	}
	return scores, *c
}

// retry records a cycle of the pod or pod group ref. Callers hold mu.
func (p *placementScores) retry(ref string) {
	if _, ok := p.backedOff[ref]; ok {
		delete(p.backedOff, ref)
		p.retried++
	}
}

// retryPending reports whether a pod or pod group the queue moved to its
// backoff queue has not been tried again yet, and how many such retries
// there were so far. One not tried within twice its backoff is not waited
// for: it may have been bound or deleted meanwhile.
func (p *placementScores) retryPending() (bool, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, at := range p.backedOff {
		if time.Since(at) < 2*groupBackoff {
			return true, p.retried
		}
	}
	return false, p.retried
}

// messageCount is how many messages the scheduler logged.
func (p *placementScores) messageCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.messages
}

// newGroupClient is a fake clientset holding objs that binds a pod when
// the scheduler creates its binding (the fake tracker would not) and
// records deletions of pods in s.
func newGroupClient(objs []k8sruntime.Object, s *groupSide) *fake.Clientset {
	copies := make([]k8sruntime.Object, len(objs))
	for i, o := range objs {
		copies[i] = o.DeepCopyObject()
	}
	client := fake.NewClientset(copies...)
	podsResource := v1.SchemeGroupVersion.WithResource("pods")
	client.PrependReactor("*", "*", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		s.mu.Lock()
		s.actions++
		s.mu.Unlock()
		return false, nil, nil
	})
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := a.(clienttesting.CreateAction).GetObject().(*v1.Binding)
		obj, err := client.Tracker().Get(podsResource, b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod).DeepCopy()
		if pod.Spec.NodeName != "" {
			return true, nil, fmt.Errorf("pod %s/%s is already bound to %s", pod.Namespace, pod.Name, pod.Spec.NodeName)
		}
		pod.Spec.NodeName = b.Target.Name
		return true, b, client.Tracker().Update(podsResource, pod, pod.Namespace)
	})
	client.PrependReactor("delete", "pods", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
		da := a.(clienttesting.DeleteAction)
		s.deletions.mu.Lock()
		s.deletions.names = append(s.deletions.names, da.GetNamespace()+"/"+da.GetName())
		s.deletions.mu.Unlock()
		return false, nil, nil
	})
	return client
}

// groupBackoff is both schedulers' pod backoff: a preempting group
// retries one second after its victims are gone.
const groupBackoff = time.Second

// newUpstreamGroupSide starts kube-scheduler 1.37.2's scheduler with its
// default profile, as the gates the caller turned on expand it, over a
// clientset holding objs. One goroutine filters and scores (parallelism
// 1), so that nodes with equal scores are ranked in the same order on
// both sides.
func newUpstreamGroupSide(ctx context.Context, objs []k8sruntime.Object) (*groupSide, error) {
	s := &groupSide{scores: &placementScores{cycles: map[string]*groupCycle{}, backedOff: map[string]time.Time{}}, done: make(chan struct{})}
	s.client = newGroupClient(objs, s)
	ctx, s.cancel = context.WithCancel(klog.NewContext(ctx, logr.New(s.scores)))
	factory := upstreamscheduler.NewInformerFactory(s.client, 0, nil)
	recorders := profile.RecorderFactory(func(string) events.EventRecorderLogger { return &events.FakeRecorder{} })
	sched, err := upstreamscheduler.New(ctx, s.client, factory, nil, recorders,
		upstreamscheduler.WithParallelism(1),
		upstreamscheduler.WithPodInitialBackoffSeconds(int64(groupBackoff/time.Second)),
		upstreamscheduler.WithPodMaxBackoffSeconds(int64(groupBackoff/time.Second)))
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("building kube-scheduler: %w", err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		s.cancel()
		return nil, fmt.Errorf("kube-scheduler's handlers did not sync: %w", err)
	}
	go func() {
		defer close(s.done)
		sched.Run(ctx)
	}()
	return s, nil
}

// workloadProfile is profile-scheduler's profile that names what
// kube-scheduler's default profile gains with GenericWorkload and
// TopologyAwareWorkloadScheduling on: its workload-aware default profile.
func workloadProfile() *configv1.KubeSchedulerProfile {
	return &configv1.KubeSchedulerProfile{
		SchedulerName: ptr.To(v1.DefaultSchedulerName),
		Plugins: &configv1.Plugins{MultiPoint: configv1.PluginSet{Enabled: []configv1.Plugin{
			{Name: "GangScheduling"},
			{Name: "TopologyPlacementGenerator"},
			{Name: "PodGroupPodsCount", Weight: ptr.To[int32](1)},
		}}},
	}
}

// newOursGroupSide starts profile-scheduler's scheduler with both
// workload gates on, serving workloadProfile.
func newOursGroupSide(ctx context.Context, objs []k8sruntime.Object) (*groupSide, error) {
	s := &groupSide{scores: &placementScores{cycles: map[string]*groupCycle{}, backedOff: map[string]time.Time{}}, done: make(chan struct{})}
	s.client = newGroupClient(objs, s)
	ctx, s.cancel = context.WithCancel(klog.NewContext(ctx, logr.New(s.scores)))
	sched, err := scheduler.New(ctx, s.client, plugins.NewInTreeRegistry(),
		scheduler.WithDefaultPlugins(plugins.DefaultPlugins()),
		scheduler.WithWorkloadGates(true, true),
		scheduler.WithParallelism(1),
		scheduler.WithPodBackoff(groupBackoff, groupBackoff))
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("building profile-scheduler: %w", err)
	}
	prof := workloadProfile()
	fwk, err := runtime.NewFramework(ctx, sched.Registry(), prof,
		append(sched.FrameworkOptions(*prof.SchedulerName), runtime.WithWorkloadGates(sched.WorkloadGates()))...)
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("building profile-scheduler's workload profile: %w", err)
	}
	if !fwk.WorkloadAware() {
		s.cancel()
		return nil, errors.New("profile-scheduler's workload profile is not workload-aware")
	}
	if err := sched.Synced(ctx); err != nil {
		s.cancel()
		return nil, err
	}
	if err := sched.StartPodGroupInformer(ctx); err != nil {
		s.cancel()
		return nil, err
	}
	sched.Profiles().Publish(*prof.SchedulerName, fwk)
	go func() {
		defer close(s.done)
		if err := sched.Start(ctx); err != nil {
			klog.Background().Error(err, "profile-scheduler stopped")
		}
		_ = fwk.Close()
	}()
	return s, nil
}

func (s *groupSide) close() {
	s.cancel()
	<-s.done
}

// activity counts the side's API actions and its log messages: it
// changes while the scheduler works. API actions alone may pause longer
// than the quiet window while a cycle runs (a gang's preemption dry run,
// on a loaded machine, takes hundreds of milliseconds without one), and
// the harness would then read a state the cycle is about to change.
func (s *groupSide) activity() int {
	s.mu.Lock()
	n := s.actions
	s.mu.Unlock()
	return n + s.scores.messageCount()
}

// create creates objs (pods and PodGroups) in the side's clientset.
func (s *groupSide) create(ctx context.Context, objs ...k8sruntime.Object) error {
	for _, o := range objs {
		var err error
		switch o := o.DeepCopyObject().(type) {
		case *v1.Pod:
			_, err = s.client.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			err = createPodGroup(ctx, s.client, o)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// pod reads a pod from the tracker, not through the clientset, whose
// actions count the scheduler's.
func (s *groupSide) pod(namespace, name string) (*v1.Pod, error) {
	obj, err := s.client.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*v1.Pod), nil
}

// podGroup reads a PodGroup from the tracker.
func (s *groupSide) podGroup(namespace, name string) (*schedulingv1beta1.PodGroup, error) {
	obj, err := s.client.Tracker().Get(schedulingv1beta1.SchemeGroupVersion.WithResource("podgroups"), namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*schedulingv1beta1.PodGroup), nil
}

// settled reports whether every one of pods is bound, or was found
// unschedulable and nominated nowhere (a nominated pod waits for its
// victims to go and is tried again), and their PodGroup group, if any,
// has the condition its pod-group cycle writes, off the loop on both
// sides.
func (s *groupSide) settled(pods []*v1.Pod, group *schedulingv1beta1.PodGroup) (bool, error) {
	if group != nil {
		pg, err := s.podGroup(group.Namespace, group.Name)
		if err != nil {
			return false, err
		}
		if !slices.ContainsFunc(pg.Status.Conditions, func(c metav1.Condition) bool {
			return c.Type == schedulingv1beta1.PodGroupInitiallyScheduled
		}) {
			return false, nil
		}
	}
	for _, p := range pods {
		cur, err := s.pod(p.Namespace, p.Name)
		if err != nil {
			return false, err
		}
		if cur.Spec.NodeName != "" {
			continue
		}
		if cur.Status.NominatedNodeName != "" || !slices.ContainsFunc(cur.Status.Conditions, func(c v1.PodCondition) bool {
			return c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse
		}) {
			return false, nil
		}
	}
	return true, nil
}
