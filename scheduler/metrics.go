package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/scheme"
)

// Result label values of the attempt metrics, as upstream.
const (
	scheduledResult     = "scheduled"
	unschedulableResult = "unschedulable"
	errorResult         = "error"
	// waitingOnPreemptionResult is a pod group's that waits for its
	// preemption victims to go.
	waitingOnPreemptionResult = "waiting_on_preemption"
)

func (s *Scheduler) observeAttempt(result, profile string, seconds float64) {
	s.metrics.ScheduleAttempts.WithLabelValues(result, profile).Inc()
	s.metrics.SchedulingAttemptDuration.WithLabelValues(result, profile).Observe(seconds)
}

func (s *Scheduler) observePodGroupAttempt(result, profile string, seconds float64) {
	s.metrics.PodGroupScheduleAttempts.WithLabelValues(result, profile).Inc()
	s.metrics.PodGroupSchedulingAttemptDuration.WithLabelValues(result, profile).Observe(seconds)
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
//
// It also warns, with one NoProfile event per pod, about a pod left
// unserved for the warning delay, but only when its schedulerName is one
// of the operator's own: a profile served it since the process started, it
// has one of the own prefixes, or it is a likely typo of a served name
// (closestName), which the event suggests. Pods of the cluster's other
// schedulers are none of its business, and a reserved name is never a
// typo.
type unservedPods struct {
	gauge       *prometheus.GaugeVec
	served      func(schedulerName string) bool
	reserved    sets.Set[string]
	ownPrefixes []string

	// mu orders the pod handlers' updates with profile changes: a series
	// is set or deleted under it, after reading served, so the last writer
	// always saw the current profile set. served takes the queue's lock,
	// which is never held while calling in here.
	mu       sync.Mutex
	pending  map[string]map[types.UID]*unservedPod
	exported bool
	// own holds the names a profile served since the process started.
	// It only grows, by at most one name per profile ever published.
	own sets.Set[string]
	// near caches, per pending schedulerName, the served name it is a
	// likely typo of ("" for none), as long as the served names are
	// nearFor: the names are compared once, not at every warning round.
	near    map[string]string
	nearFor []string
}

// unservedPod is what the warning needs of a pending pod. The set of them
// is bounded by the pending pods: an entry goes with its pod.
type unservedPod struct {
	pod *v1.Pod
	// seen is when this process first saw the pod pending.
	seen   time.Time
	warned bool
}

func newUnservedPods(gauge *prometheus.GaugeVec, served func(string) bool, reserved, ownPrefixes []string) *unservedPods {
	return &unservedPods{
		gauge:       gauge,
		served:      served,
		reserved:    sets.New(reserved...),
		ownPrefixes: ownPrefixes,
		pending:     map[string]map[types.UID]*unservedPod{},
		own:         sets.New[string](),
		near:        map[string]string{},
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
	pods := u.pending[name]
	if pods == nil {
		pods = map[types.UID]*unservedPod{}
		u.pending[name] = pods
	}
	if _, ok := pods[pod.UID]; !ok {
		pods[pod.UID] = &unservedPod{pod: pod, seen: time.Now()}
	}
	u.refreshLocked(name)
}

func (u *unservedPods) remove(pod *v1.Pod) {
	name := pod.Spec.SchedulerName
	u.mu.Lock()
	defer u.mu.Unlock()
	pods := u.pending[name]
	if _, ok := pods[pod.UID]; !ok {
		return
	}
	delete(pods, pod.UID)
	if len(pods) == 0 {
		delete(u.pending, name)
		delete(u.near, name)
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
	served := u.served(name)
	if served {
		u.own.Insert(name)
	}
	if !u.exported {
		return
	}
	n := len(u.pending[name])
	if n == 0 || u.reserved.Has(name) || served {
		u.gauge.DeleteLabelValues(name)
		return
	}
	u.gauge.WithLabelValues(name).Set(float64(n))
}

// isOwnLocked tells whether name is one the operator has reason to think
// its own; reserved names never are.
func (u *unservedPods) isOwnLocked(name string) bool {
	if u.reserved.Has(name) {
		return false
	}
	return u.own.Has(name) || slices.ContainsFunc(u.ownPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// unservedWarning is a pod to warn about, with the served name its
// schedulerName is a likely typo of, if any.
type unservedWarning struct {
	pod        *v1.Pod
	suggestion string
}

// due returns the pods of own names, and of names close to one of served
// (the served names, sorted), that no profile served for delay since they
// were first seen, and marks them warned: each is returned once in its
// life.
func (u *unservedPods) due(now time.Time, delay time.Duration, served []string) []unservedWarning {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.exported {
		return nil
	}
	if !slices.Equal(u.nearFor, served) {
		clear(u.near)
		u.nearFor = served
	}
	var due []unservedWarning
	for name, pods := range u.pending {
		if u.reserved.Has(name) || u.served(name) {
			continue
		}
		suggestion, ok := u.near[name]
		if !ok {
			suggestion = closestName(name, served)
			u.near[name] = suggestion
		}
		if suggestion == "" && !u.isOwnLocked(name) {
			continue
		}
		for _, p := range pods {
			if !p.warned && now.Sub(p.seen) >= delay {
				p.warned = true
				due = append(due, unservedWarning{pod: p.pod, suggestion: suggestion})
			}
		}
	}
	return due
}

// warnUnserved emits the NoProfile events, every half delay, until ctx
// ends. It runs beside the scheduling loop, never in it, and makes at most
// one event per pod.
func (s *Scheduler) warnUnserved(ctx context.Context, delay time.Duration) {
	ticker := time.NewTicker(max(delay/2, 100*time.Millisecond))
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			// Read outside the unserved lock: the profile set calls in
			// there while holding its own.
			served := s.profiles.Names()
			warnings := s.unserved.due(now, delay, served)
			names := strings.Join(served, ", ")
			for _, w := range warnings {
				name := w.pod.Spec.SchedulerName
				msg := fmt.Sprintf("no SchedulingProfile serves schedulerName %q (profiles: %s)", name, names)
				if w.suggestion != "" {
					msg += fmt.Sprintf("; did you mean %s?", w.suggestion)
				}
				s.broadcaster.NewRecorder(scheme.Scheme, name).Eventf(w.pod, nil, v1.EventTypeWarning, noProfileReason, "Scheduling", "%s", msg)
			}
		}
	}
}

// noProfileReason is the reason of the event about a pod no profile serves.
const noProfileReason = "NoProfile"
