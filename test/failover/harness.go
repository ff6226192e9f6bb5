package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/test/outage"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

const (
	namespace     = "failover"
	schedulerName = "failover-scheduler"
	leaseName     = "profile-scheduler.scheduling.schedprofiles.io"
	// Requests of every pod of the stream, and the nodes' shape: 80 pods
	// fill a node's cpu, so a run of a few thousand pods needs few nodes.
	podCPU, podMemory   = "50m", "100Mi"
	nodeCPU, nodeMemory = "4", "32Gi"
	// pollInterval is how often the harness looks at the Lease and at the
	// replicas' endpoints while it waits.
	pollInterval = 20 * time.Millisecond
)

// Options are the settings of one benchmark run.
type Options struct {
	// Failovers is how many times the leader is killed.
	Failovers int
	// Nodes is the number of simulated nodes.
	Nodes int
	// Rate is the pods created per second, from start to end.
	Rate float64
	// LeaseDuration, RenewDeadline and RetryPeriod are the replicas'
	// leader election settings.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Timeout bounds each wait of a failover: for a steady leader, for the
	// new leader's first binding, for the backlog to drain.
	Timeout time.Duration
	// Grace is how old a pod must be for the checks to require it bound.
	Grace time.Duration
	// Dir holds the binary and the replicas' logs.
	Dir string
	// Progress receives a line per step; nil discards them.
	Progress io.Writer
}

// Failover is the figures of one failover, in seconds.
type Failover struct {
	// OldLeader and NewLeader are the Lease holder identities.
	OldLeader string `json:"oldLeader"`
	NewLeader string `json:"newLeader"`
	// DeathToAcquired is from SIGKILL to the new holder's acquireTime,
	// AcquiredToFirstBind from there to the first pod seen bound, and
	// DeathToFirstBind their sum.
	DeathToAcquired     float64 `json:"deathToLeaseAcquiredSeconds"`
	AcquiredToFirstBind float64 `json:"leaseAcquiredToFirstBindSeconds"`
	DeathToFirstBind    float64 `json:"deathToFirstBindSeconds"`
	// Drain is from SIGKILL until every pod created before then was bound.
	Drain float64 `json:"deathToBacklogBoundSeconds"`
	// PodsCreated and PodsBound are the totals when the checks passed.
	PodsCreated int `json:"podsCreated"`
	PodsBound   int `json:"podsBound"`
}

// Distribution is the percentiles of a figure over the failovers, in seconds.
type Distribution struct {
	Perc50  float64 `json:"perc50"`
	Perc99  float64 `json:"perc99"`
	Max     float64 `json:"max"`
	Samples int     `json:"samples"`
}

func distribution(values []float64) Distribution {
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	d := Distribution{Perc50: testenv.Percentile(sorted, 50), Perc99: testenv.Percentile(sorted, 99), Samples: len(sorted)}
	if len(sorted) > 0 {
		d.Max = sorted[len(sorted)-1]
	}
	return d
}

// harness is one run: the API server, the two replicas, the pod stream.
type harness struct {
	o        Options
	cs       kubernetes.Interface
	c        client.Client
	replicas []*outage.Replica
	watch    *outage.PodWatch

	// unplannedRestarts counts replicas found exited that the harness did
	// not kill (a leader that cannot renew its Lease in time exits).
	unplannedRestarts int

	// mu guards created, which the pod stream fills.
	mu      sync.Mutex
	created map[string]time.Time // pod name → when its create returned
}

// Run is what runFailovers measured.
type Run struct {
	Failovers         []Failover
	PodsCreated       int
	PodsBound         int
	UnplannedRestarts int
}

// runFailovers runs the whole benchmark and returns the per-failover figures.
func runFailovers(ctx context.Context, o Options) (*Run, error) {
	if o.Failovers < 1 || o.Nodes < 1 || o.Rate <= 0 {
		return nil, fmt.Errorf("need at least one failover, one node and a positive rate, got %d, %d, %g", o.Failovers, o.Nodes, o.Rate)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	h := &harness{o: o, watch: outage.NewPodWatch(), created: map[string]time.Time{}}
	h.progress("building the operator")
	bin, err := testenv.BuildOperator(ctx, o.Dir)
	if err != nil {
		return nil, err
	}

	h.progress("starting kube-apiserver and etcd")
	env, err := testenv.New()
	if err != nil {
		return nil, err
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, err
	}
	defer func() { _ = env.Stop() }()
	cfg.QPS, cfg.Burst = 5000, 5000
	if h.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if h.c, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return nil, err
	}
	kubeconfig, err := outage.AdminKubeconfig(env, o.Dir, "profile-scheduler", "")
	if err != nil {
		return nil, err
	}
	if err := h.setUp(ctx); err != nil {
		return nil, err
	}

	factory := informers.NewSharedInformerFactoryWithOptions(h.cs, 0, informers.WithNamespace(namespace))
	pods := factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(h.watch.Handler()); err != nil {
		return nil, err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	factory.Start(watchCtx.Done())
	// Shutdown waits for the informers, which stop with watchCtx.
	defer func() { stopWatch(); factory.Shutdown() }()
	if !cacheSynced(watchCtx, factory) {
		return nil, errors.New("the pod watch did not sync")
	}

	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect",
		"--leader-election-id=" + leaseName,
		"--leader-election-namespace=" + namespace,
		"--leader-elect-lease-duration=" + o.LeaseDuration.String(),
		"--leader-elect-renew-deadline=" + o.RenewDeadline.String(),
		"--leader-elect-retry-period=" + o.RetryPeriod.String(),
		// Takeovers last milliseconds: the logs need finer timestamps.
		"--zap-time-encoding=rfc3339nano",
	}
	for _, name := range []string{"a", "b"} {
		r, err := outage.NewReplica(name, bin, filepath.Join(o.Dir, "replica-"+name+".log"), args)
		if err != nil {
			return nil, err
		}
		h.replicas = append(h.replicas, r)
	}
	defer h.stopReplicas()
	for _, r := range h.replicas {
		if err := r.Start(); err != nil {
			return nil, err
		}
	}

	streamCtx, stopStream := context.WithCancel(ctx)
	streamDone := make(chan struct{})
	var streamErr error
	go func() {
		defer close(streamDone)
		streamErr = h.stream(streamCtx)
	}()
	defer func() { stopStream(); <-streamDone }()

	run := &Run{}
	for i := range o.Failovers {
		f, err := h.failover(ctx, i+1)
		if err != nil {
			return nil, fmt.Errorf("failover %d: %w", i+1, err)
		}
		run.Failovers = append(run.Failovers, *f)
		select {
		case <-streamDone:
			return nil, fmt.Errorf("the pod stream stopped: %w", streamErr)
		default:
		}
	}
	h.mu.Lock()
	run.PodsCreated = len(h.created)
	h.mu.Unlock()
	run.UnplannedRestarts = h.unplannedRestarts
	run.PodsBound = h.watch.Bound()
	return run, nil
}

func cacheSynced(ctx context.Context, factory informers.SharedInformerFactory) bool {
	for _, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return false
		}
	}
	return true
}

// setUp creates the namespace, the nodes and the profile.
func (h *harness) setUp(ctx context.Context) error {
	h.progress("creating %d nodes and the profile", h.o.Nodes)
	if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	for i := range h.o.Nodes {
		if err := testenv.CreateNode(ctx, h.c, testenv.Node(fmt.Sprintf("node-%04d", i), nodeCPU, nodeMemory, nil)); err != nil {
			return err
		}
	}
	// The default plugins: what a failover costs does not depend on them.
	return h.c.Create(ctx, &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: schedulerName}})
}

// stream creates a pod every 1/Rate seconds until ctx ends. It returns
// nil when ctx ends and the first error otherwise.
func (h *harness) stream(ctx context.Context) error {
	tick := time.NewTicker(time.Duration(float64(time.Second) / h.o.Rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		name := fmt.Sprintf("pod-%06d", i)
		if err := h.c.Create(ctx, testenv.Pod(namespace, name, schedulerName, podCPU, podMemory)); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("creating pod %s: %w", name, err)
		}
		h.mu.Lock()
		h.created[name] = time.Now()
		h.mu.Unlock()
	}
}

// failover waits for a steady leader, kills it and measures until the new
// leader binds, then restarts the killed replica and checks the cluster.
func (h *harness) failover(ctx context.Context, n int) (*Failover, error) {
	leader, lease, err := h.steadyLeader(ctx)
	if err != nil {
		return nil, err
	}
	oldHolder := *lease.Spec.HolderIdentity
	h.progress("failover %d: killing replica %s (%s)", n, leader.Name, oldHolder)
	// Taken before the signal, so the figures include its delivery.
	death := time.Now()
	if err := leader.Kill(); err != nil {
		return nil, err
	}

	var acquired time.Time
	var newHolder string
	err = h.poll(ctx, "a new Lease holder", func(ctx context.Context) (bool, error) {
		l, err := h.cs.CoordinationV1().Leases(namespace).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || *l.Spec.HolderIdentity == oldHolder || l.Spec.AcquireTime == nil {
			return false, nil
		}
		acquired, newHolder = l.Spec.AcquireTime.Time, *l.Spec.HolderIdentity
		return true, nil
	})
	if err != nil {
		return nil, err
	}

	// Only a binding seen after the new holder's acquireTime is the new
	// leader's: requests the dead leader sent before SIGKILL may still
	// complete in the API server after its death and show up on the watch,
	// but never after the Lease it held expired, since acquireTime is at
	// least a lease duration after its last renewal.
	var first outage.Binding
	err = h.poll(ctx, "the new leader's first binding", func(context.Context) (bool, error) {
		var ok bool
		first, ok = h.watch.FirstBindingAfter(acquired)
		return ok, nil
	})
	if err != nil {
		return nil, err
	}
	f := &Failover{
		OldLeader: oldHolder, NewLeader: newHolder,
		DeathToAcquired:     acquired.Sub(death).Seconds(),
		AcquiredToFirstBind: first.At.Sub(acquired).Seconds(),
		DeathToFirstBind:    first.At.Sub(death).Seconds(),
	}
	h.progress("failover %d: lease acquired after %.2fs, first binding (%s on %s) %.2fs later",
		n, f.DeathToAcquired, first.Pod, first.Node, f.AcquiredToFirstBind)

	if err := leader.Start(); err != nil {
		return nil, err
	}
	if err := h.drained(ctx, death); err != nil {
		return nil, err
	}
	f.Drain = time.Since(death).Seconds()
	if err := h.check(ctx); err != nil {
		return nil, err
	}
	h.mu.Lock()
	f.PodsCreated = len(h.created)
	h.mu.Unlock()
	f.PodsBound = h.watch.Bound()
	return f, nil
}

// steadyLeader waits until both replicas are ready, one of them leads the
// Lease, and pods were seen bound under its leadership, and returns that
// replica and the Lease. Replicas that exited on their own (a leader that
// could not renew in time exits) are restarted and counted.
func (h *harness) steadyLeader(ctx context.Context) (*outage.Replica, *coordinationv1.Lease, error) {
	recent := max(2*time.Second, time.Duration(3*float64(time.Second)/h.o.Rate))
	var leader *outage.Replica
	var lease *coordinationv1.Lease
	err := h.poll(ctx, "both replicas ready and a leader binding pods", func(ctx context.Context) (bool, error) {
		leader, lease = nil, nil
		for _, r := range h.replicas {
			if r.Exited() {
				h.progress("replica %s exited on its own (%v); restarting it", r.Name, r.Err())
				h.unplannedRestarts++
				if err := r.Start(); err != nil {
					return false, err
				}
			}
		}
		for _, r := range h.replicas {
			if !r.Ready(ctx) {
				return false, nil
			}
			if r.Leads(ctx, leaseName) {
				if leader != nil {
					return false, nil
				}
				leader = r
			}
		}
		if leader == nil {
			return false, nil
		}
		l, err := h.cs.CoordinationV1().Leases(namespace).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || l.Spec.AcquireTime == nil {
			return false, nil
		}
		lease = l
		last := h.watch.LastBinding()
		return last.After(l.Spec.AcquireTime.Time) && time.Since(last) < recent, nil
	})
	return leader, lease, err
}

// drained waits until every pod created more than Grace ago was bound, and
// at least every pod created before the leader's death.
func (h *harness) drained(ctx context.Context, death time.Time) error {
	var pending []string
	err := h.poll(ctx, "the backlog to be bound", func(ctx context.Context) (bool, error) {
		before := time.Now().Add(-h.o.Grace)
		if before.Before(death) {
			before = death
		}
		var err error
		pending, err = h.pendingOlderThan(ctx, before)
		return err == nil && len(pending) == 0, nil
	})
	if err != nil && len(pending) > 0 {
		return fmt.Errorf("%w: %d pods not bound, e.g. %s", err, len(pending), pending[0])
	}
	return err
}

// pendingOlderThan lists the pods created before t that are not bound.
func (h *harness) pendingOlderThan(ctx context.Context, t time.Time) ([]string, error) {
	var pods corev1.PodList
	if err := h.c.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var pending []string
	for _, p := range pods.Items {
		if created, ok := h.created[p.Name]; ok && created.Before(t) && p.Spec.NodeName == "" {
			pending = append(pending, p.Name)
		}
	}
	slices.Sort(pending)
	return pending, nil
}

// check verifies the invariants (outage.Check): no pod bound twice, no
// node overcommitted.
func (h *harness) check(ctx context.Context) error {
	problems, err := outage.Check(ctx, h.cs, h.c, namespace, h.watch)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("invariants broken:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// poll calls cond every pollInterval until it returns true or an error, or
// Timeout passes; what names the awaited state in the error.
func (h *harness) poll(ctx context.Context, what string, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(ctx, pollInterval, h.o.Timeout, true, cond)
	if err != nil && ctx.Err() == nil && wait.Interrupted(err) {
		return fmt.Errorf("waited %v for %s; replica logs are in %s", h.o.Timeout, what, h.o.Dir)
	}
	return err
}

// stopReplicas stops both replicas, SIGTERM first.
func (h *harness) stopReplicas() {
	for _, r := range h.replicas {
		if err := r.Stop(); err != nil {
			h.progress("%v", err)
		}
	}
}

func (h *harness) progress(format string, args ...any) {
	fmt.Fprintf(h.o.Progress, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}
