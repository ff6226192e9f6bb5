package scheduler

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Result label values of the attempt metrics, as upstream.
const (
	scheduledResult     = "scheduled"
	unschedulableResult = "unschedulable"
	errorResult         = "error"
)

func (s *Scheduler) observeAttempt(result, profile string, seconds float64) {
	s.metrics.ScheduleAttempts.WithLabelValues(result, profile).Inc()
	s.metrics.SchedulingAttemptDuration.WithLabelValues(result, profile).Observe(seconds)
}

// attemptsLabel buckets the attempt count as upstream ("15+" beyond 15).
func attemptsLabel(attempts int) string {
	if attempts >= 15 {
		return "15+"
	}
	return strconv.Itoa(attempts)
}

// unservedPods keeps scheduler_unserved_pending_pods: per schedulerName, the
// pending pods (unbound and not finished) that no profile serves. Names
// reserved for other schedulers (default-scheduler, typically) are served,
// just not here, so they get no series at all; nor does a name whose count
// is zero, so that names seen once do not linger.
//
// It holds every pending pod, served or not, so that the count of a name is
// there the moment its profile goes away. It exports nothing until start:
// a standby serves no profile yet, and counting every pending pod as
// unserved there would raise alerts about a healthy leader's pods.
type unservedPods struct {
	gauge    *prometheus.GaugeVec
	served   func(schedulerName string) bool
	reserved sets.Set[string]

	// mu orders the pod handlers' updates with profile changes: a series
	// is set or deleted under it, after reading served, so the last writer
	// always saw the current profile set. served takes the queue's lock,
	// which is never held while calling in here.
	mu       sync.Mutex
	pending  map[string]sets.Set[types.UID]
	exported bool
}

func newUnservedPods(gauge *prometheus.GaugeVec, served func(string) bool, reserved []string) *unservedPods {
	return &unservedPods{
		gauge:    gauge,
		served:   served,
		reserved: sets.New(reserved...),
		pending:  map[string]sets.Set[types.UID]{},
	}
}

func waitingForNode(pod *v1.Pod) bool { return !assignedPod(pod) && !terminalPod(pod) }

func (u *unservedPods) add(pod *v1.Pod) {
	if !waitingForNode(pod) {
		return
	}
	name := pod.Spec.SchedulerName
	u.mu.Lock()
	defer u.mu.Unlock()
	uids := u.pending[name]
	if uids == nil {
		uids = sets.New[types.UID]()
		u.pending[name] = uids
	}
	uids.Insert(pod.UID)
	u.refreshLocked(name)
}

func (u *unservedPods) remove(pod *v1.Pod) {
	name := pod.Spec.SchedulerName
	u.mu.Lock()
	defer u.mu.Unlock()
	uids := u.pending[name]
	if !uids.Has(pod.UID) {
		return
	}
	uids.Delete(pod.UID)
	if uids.Len() == 0 {
		delete(u.pending, name)
	}
	u.refreshLocked(name)
}

// update follows a pod that was bound or finished. spec.schedulerName is
// immutable, so only leaving the pending state matters.
func (u *unservedPods) update(oldPod, newPod *v1.Pod) {
	if waitingForNode(oldPod) && !waitingForNode(newPod) {
		u.remove(oldPod)
	}
}

// start exports the counts from now on; the scheduling loop calls it when
// it starts serving.
func (u *unservedPods) start() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.exported = true
	for name := range u.pending {
		u.refreshLocked(name)
	}
}

// refresh re-exports name's count after its profile came or went.
func (u *unservedPods) refresh(name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.refreshLocked(name)
}

func (u *unservedPods) refreshLocked(name string) {
	if !u.exported {
		return
	}
	n := u.pending[name].Len()
	if n == 0 || u.reserved.Has(name) || u.served(name) {
		u.gauge.DeleteLabelValues(name)
		return
	}
	u.gauge.WithLabelValues(name).Set(float64(n))
}
