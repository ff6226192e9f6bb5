package runtime

import (
	"context"
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// PodsInPreBind holds the pods whose binding cycle runs PreBind plugins
// with work for them, so that preemption can cancel such a victim in
// memory (upstream's podsInPreBindMap). As upstream, the scheduler shares
// one among all its instances (WithPodsInPreBind): a pod UID belongs to
// one profile, and an instance that serves a profile finds the victims
// whose binding cycle still runs on the instance it replaced. It is apart
// from the waiting pods on purpose: a pod in PreBind is past Permit, is no
// WaitingPod, and nothing that lists waiting pods (the WaitingPod mirror,
// gang plugins) may see it.
type PodsInPreBind struct {
	// mu guards pods only; it is never held while a pod's own lock is
	// taken, nor while a context is cancelled.
	mu   sync.RWMutex
	pods map[types.UID]*podInPreBind
}

// NewPodsInPreBind returns an empty set of pods in PreBind.
func NewPodsInPreBind() *PodsInPreBind {
	return &PodsInPreBind{pods: make(map[types.UID]*podInPreBind)}
}

// add registers uid's binding cycle, whose PreBind runs under a context
// that cancel ends; it replaces an earlier entry of the same uid.
func (m *PodsInPreBind) add(uid types.UID, cancel context.CancelCauseFunc) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pods[uid] = &podInPreBind{cancel: cancel, done: make(chan struct{})}
}

// remove forgets uid's entry and closes its done channel.
func (m *PodsInPreBind) remove(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.pods[uid]; p != nil {
		close(p.done)
		delete(m.pods, uid)
	}
}

func (m *PodsInPreBind) get(uid types.UID) *podInPreBind {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.pods[uid]
}

// podInPreBind is one pod in PreBind. Once the binding cycle marked it
// prebound (its binding is about to be sent) it can no longer be
// cancelled, and once cancelled it can no longer be marked: whichever of
// CancelPod and MarkPrebound takes mu first wins, so a pod is never both
// bound and counted as preempted in memory.
type podInPreBind struct {
	mu       sync.Mutex
	finished bool
	canceled bool
	cancel   context.CancelCauseFunc
	// done is closed by remove.
	done chan struct{}
}

var _ framework.PodInPreBind = (*podInPreBind)(nil)

func (p *podInPreBind) CancelPod(reason string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return false
	}
	if !p.canceled {
		p.cancel(errors.New(reason))
		p.canceled = true
	}
	return true
}

func (p *podInPreBind) MarkPrebound() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.canceled {
		return false
	}
	p.finished = true
	return true
}

func (p *podInPreBind) Done() <-chan struct{} { return p.done }
