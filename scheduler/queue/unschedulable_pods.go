package queue

import (
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// unschedulableEntry is a pod in the pool; gated records how it was
// counted so the gauges stay right if its gate changes while it is there.
type unschedulableEntry struct {
	pInfo *framework.QueuedPodInfo
	gated bool
}

func (p *PriorityQueue) addUnschedulable(pInfo *framework.QueuedPodInfo) {
	p.deleteUnschedulable(pInfo.Pod.UID)
	gated := pInfo.Gated()
	p.unschedulable[pInfo.Pod.UID] = unschedulableEntry{pInfo: pInfo, gated: gated}
	if gated {
		p.gatedCount++
	}
}

func (p *PriorityQueue) deleteUnschedulable(uid types.UID) {
	if e, ok := p.unschedulable[uid]; ok {
		if e.gated {
			p.gatedCount--
		}
		delete(p.unschedulable, uid)
	}
}

// flushUnschedulablePodsLeftover retries pods that waited in the pool
// longer than podMaxInUnschedulable, whatever their plugins registered.
func (p *PriorityQueue) flushUnschedulablePodsLeftover(logger klog.Logger) {
	p.lock.Lock()
	defer p.lock.Unlock()
	now := p.clock.Now()
	var pods []*framework.QueuedPodInfo
	for _, e := range p.unschedulable {
		if now.Sub(e.pInfo.Timestamp) > p.podMaxInUnschedulable {
			pods = append(pods, e.pInfo)
		}
	}
	if len(pods) > 0 {
		p.movePodsToActiveOrBackoffQueue(logger, pods, EventUnschedulableTimeout, nil, nil)
	}
	p.updateMetrics()
}
