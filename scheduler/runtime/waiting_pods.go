package runtime

import (
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// waitingPodsMap holds the pods of one instance that wait at Permit.
type waitingPodsMap struct {
	// mu guards pods. iterate holds the read lock while it calls back, so
	// callbacks may Allow/Reject (which take only the pod's own lock) but
	// must not add or remove entries.
	mu   sync.RWMutex
	pods map[types.UID]*waitingPod
}

func newWaitingPodsMap() *waitingPodsMap {
	return &waitingPodsMap{pods: make(map[types.UID]*waitingPod)}
}

func (m *waitingPodsMap) add(wp *waitingPod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pods[wp.pod.UID] = wp
}

func (m *waitingPodsMap) remove(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pods, uid)
}

func (m *waitingPodsMap) get(uid types.UID) *waitingPod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.pods[uid]
}

func (m *waitingPodsMap) iterate(callback func(framework.WaitingPod)) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, wp := range m.pods {
		callback(wp)
	}
}

type pendingPlugin struct {
	timer    *time.Timer
	deadline time.Time
}

// waitingPod is a pod held at Permit until every pending plugin allows it,
// one rejects it, or a plugin's timer fires.
type waitingPod struct {
	pod      *v1.Pod
	nodeName string

	// s delivers the single final status to WaitOnPermit. It has capacity 1
	// and is written at most once (guarded by done under mu), so Allow,
	// Reject and timer callbacks never block, even when nobody is waiting
	// on the channel yet.
	s chan *framework.Status

	// mu guards pending and done. Timer callbacks take it too; newWaitingPod
	// holds it while arming the timers so that a zero timeout cannot fire
	// before the map is complete.
	mu      sync.Mutex
	pending map[string]pendingPlugin
	// done is set once the final status has been sent; later Allow and
	// Reject calls are no-ops.
	done bool
	// resolution says how the wait ended; set with done, read by
	// WaitOnPermit after it received the status (the channel orders it).
	resolution framework.PermitResolution
}

var _ framework.WaitingPod = (*waitingPod)(nil)

// newWaitingPod arms one timer per plugin in waitTimes.
func newWaitingPod(pod *v1.Pod, nodeName string, waitTimes map[string]time.Duration) *waitingPod {
	wp := &waitingPod{
		pod:      pod,
		nodeName: nodeName,
		s:        make(chan *framework.Status, 1),
		pending:  make(map[string]pendingPlugin, len(waitTimes)),
	}
	wp.mu.Lock()
	defer wp.mu.Unlock()
	now := time.Now()
	for plugin, wait := range waitTimes {
		wp.pending[plugin] = pendingPlugin{
			deadline: now.Add(wait),
			timer: time.AfterFunc(wait, func() {
				wp.stopWithStatus(framework.PermitTimedOut, framework.Unschedulable, plugin,
					fmt.Sprintf("rejected due to timeout after waiting %v at plugin %v", wait, plugin))
			}),
		}
	}
	return wp
}

func (w *waitingPod) GetPod() *v1.Pod { return w.pod }

func (w *waitingPod) GetNodeName() string { return w.nodeName }

func (w *waitingPod) GetPendingPlugins() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.pending))
	for p := range w.pending {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func (w *waitingPod) GetPendingPluginDeadlines() map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]time.Time, len(w.pending))
	for p, pp := range w.pending {
		out[p] = pp.deadline
	}
	return out
}

func (w *waitingPod) Allow(pluginName string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	if pp, ok := w.pending[pluginName]; ok {
		pp.timer.Stop()
		delete(w.pending, pluginName)
	}
	if len(w.pending) != 0 {
		return
	}
	w.done = true
	w.resolution = framework.PermitAllowed
	w.s <- framework.NewStatus(framework.Success, "")
}

func (w *waitingPod) Reject(pluginName, msg string) bool {
	return w.stopWithStatus(framework.PermitRejected, framework.Unschedulable, pluginName, msg)
}

func (w *waitingPod) Preempt(pluginName, msg string) bool {
	return w.stopWithStatus(framework.PermitPreempted, framework.Error, pluginName, msg)
}

func (w *waitingPod) stopWithStatus(resolution framework.PermitResolution, code framework.Code, pluginName, msg string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return false
	}
	for _, pp := range w.pending {
		pp.timer.Stop()
	}
	w.done = true
	w.resolution = resolution
	w.s <- framework.NewStatus(code, msg).WithPlugin(pluginName)
	return true
}
