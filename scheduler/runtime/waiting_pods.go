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
	// mu guards pods. iterate releases it before it calls back: a callback
	// may Allow a pod, which can call the gang plugin's HoldChanged, which
	// takes the plugin's lock and iterates again. Holding the read lock
	// across that would deadlock once a writer queues (RWMutex blocks a
	// second RLock then) while another goroutine holds the plugin's lock
	// and waits for the read lock.
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

// iterate calls callback for each pod waiting when it was called, without
// mu held; a pod may have been resolved or removed by then, which its own
// lock tells.
func (m *waitingPodsMap) iterate(callback func(framework.WaitingPod)) {
	m.mu.RLock()
	wps := make([]*waitingPod, 0, len(m.pods))
	for _, wp := range m.pods {
		wps = append(wps, wp)
	}
	m.mu.RUnlock()
	for _, wp := range wps {
		callback(wp)
	}
}

type pendingPlugin struct {
	// timer is nil until arm runs.
	timer    *time.Timer
	timeout  time.Duration
	deadline time.Time
	// message is what the plugin says it waits for, shown to people.
	message string
}

func (pp pendingPlugin) stop() {
	if pp.timer != nil {
		pp.timer.Stop()
	}
}

// permitWait is one plugin's request to hold a pod at Permit.
type permitWait struct {
	timeout time.Duration
	message string
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

	// changed, if set, is told when pending plugins or their messages
	// change while the pod is still held. It is called without mu held,
	// since it reads the pod back through its getters.
	changed func(*waitingPod)
	// allowed, if set, is told which plugin allowed the pod when others
	// still hold it, after changed. It is called without mu held: it calls
	// a gang plugin (GangPermitPlugin.HoldChanged), which takes its own lock
	// and then this one.
	allowed func(wp *waitingPod, pluginName string)

	// mu guards pending and done. Timer callbacks take it too; arm holds
	// it while arming the timers so that a zero timeout cannot fire before
	// every timer is in pending. Only allowTogether holds the mu of more
	// than one pod, taking them in UID order.
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

// newWaitingPod returns the pod held by the plugins in waits. Their timers
// do not run until arm is called: RunPermitPlugins first lets the gang
// plugin release the pod, so that a zero timeout cannot reject a pod that
// completes its gang.
func newWaitingPod(pod *v1.Pod, nodeName string, waits map[string]permitWait, changed func(*waitingPod), allowed func(*waitingPod, string)) *waitingPod {
	wp := &waitingPod{
		pod:      pod,
		nodeName: nodeName,
		s:        make(chan *framework.Status, 1),
		changed:  changed,
		allowed:  allowed,
		pending:  make(map[string]pendingPlugin, len(waits)),
	}
	now := time.Now()
	for plugin, w := range waits {
		wp.pending[plugin] = pendingPlugin{timeout: w.timeout, deadline: now.Add(w.timeout), message: w.message}
	}
	return wp
}

// arm starts one timer per plugin still holding the pod, unless the wait
// is over. Call it once.
func (w *waitingPod) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	for plugin, pp := range w.pending {
		pp.timer = time.AfterFunc(time.Until(pp.deadline), func() {
			w.stopWithStatus(framework.PermitTimedOut, framework.Unschedulable, plugin,
				fmt.Sprintf("rejected due to timeout after waiting %v at plugin %v", pp.timeout, plugin))
		})
		w.pending[plugin] = pp
	}
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

func (w *waitingPod) GetPendingPluginMessages() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]string, len(w.pending))
	for p, pp := range w.pending {
		if pp.message != "" {
			out[p] = pp.message
		}
	}
	return out
}

func (w *waitingPod) SetPendingMessage(pluginName, msg string) {
	if w.setPendingMessage(pluginName, msg) {
		w.notifyChanged()
	}
}

func (w *waitingPod) setPendingMessage(pluginName, msg string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	pp, ok := w.pending[pluginName]
	if w.done || !ok || pp.message == msg {
		return false
	}
	pp.message = msg
	w.pending[pluginName] = pp
	return true
}

func (w *waitingPod) notifyChanged() {
	if w.changed != nil {
		w.changed(w)
	}
}

func (w *waitingPod) Allow(pluginName string) {
	w.mu.Lock()
	changed := w.allowLocked(pluginName)
	w.mu.Unlock()
	if changed {
		w.notifyChanged()
		if w.allowed != nil {
			w.allowed(w, pluginName)
		}
	}
}

func (w *waitingPod) HeldBy(pluginName string) (held, alone bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.heldByLocked(pluginName)
}

// heldByLocked is HeldBy with mu held.
func (w *waitingPod) heldByLocked(pluginName string) (held, alone bool) {
	_, ok := w.pending[pluginName]
	held = !w.done && ok
	return held, held && len(w.pending) == 1
}

// wasAllowed reports whether every plugin allowed the pod.
func (w *waitingPod) wasAllowed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done && w.resolution == framework.PermitAllowed
}

// allowLocked removes pluginName from the pending plugins and, when it was
// the last, resolves the wait. It reports whether the pod is still held
// with fewer pending plugins, which observers are told. Call with mu held.
func (w *waitingPod) allowLocked(pluginName string) bool {
	if w.done {
		return false
	}
	pp, ok := w.pending[pluginName]
	if ok {
		pp.stop()
		delete(w.pending, pluginName)
	}
	if len(w.pending) != 0 {
		return ok
	}
	w.done = true
	w.resolution = framework.PermitAllowed
	w.s <- framework.NewStatus(framework.Success, "")
	return false
}

// allowTogether lets all of pods proceed or, if one of them is already
// resolved or held by a plugin other than pluginName, none, holding every
// pod's mu (in UID order, so two calls cannot deadlock) while it checks and
// allows. Every pod it allows is resolved, so nobody is told of a change.
func allowTogether(pluginName string, pods []framework.WaitingPod) bool {
	wps := make([]*waitingPod, 0, len(pods))
	seen := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		wp, ok := p.(*waitingPod)
		if !ok {
			return false
		}
		if seen[wp.pod.UID] {
			continue
		}
		seen[wp.pod.UID] = true
		wps = append(wps, wp)
	}
	sort.Slice(wps, func(i, j int) bool { return wps[i].pod.UID < wps[j].pod.UID })
	for _, wp := range wps {
		wp.mu.Lock()
	}
	ok := true
	for _, wp := range wps {
		if _, alone := wp.heldByLocked(pluginName); !alone {
			ok = false
			break
		}
	}
	if ok {
		for _, wp := range wps {
			wp.allowLocked(pluginName)
		}
	}
	for _, wp := range wps {
		wp.mu.Unlock()
	}
	return ok
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
		pp.stop()
	}
	w.done = true
	w.resolution = resolution
	w.s <- framework.NewStatus(code, msg).WithPlugin(pluginName)
	return true
}
