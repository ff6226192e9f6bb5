package queue

import (
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// unschedulableEntry is an entity in the pool; gated and size record how
// it was counted, so the gauges stay right if its gate changes while it is
// there.
type unschedulableEntry struct {
	entity framework.QueuedEntityInfo
	gated  bool
	size   int
}

func (p *PriorityQueue) addUnschedulable(e framework.QueuedEntityInfo) {
	key := keyOf(e)
	p.deleteUnschedulable(key)
	entry := unschedulableEntry{entity: e, gated: e.Gated(), size: e.Size()}
	p.unschedulable[key] = entry
	if entry.gated {
		p.gatedPods += entry.size
	} else {
		p.unschedulablePods += entry.size
	}
}

// deleteUnschedulable removes the entity with key from the pool and returns
// it, or nil if it was not there.
func (p *PriorityQueue) deleteUnschedulable(key entityKey) framework.QueuedEntityInfo {
	e, ok := p.unschedulable[key]
	if !ok {
		return nil
	}
	if e.gated {
		p.gatedPods -= e.size
	} else {
		p.unschedulablePods -= e.size
	}
	delete(p.unschedulable, key)
	return e.entity
}

// flushUnschedulablePodsLeftover retries entities that waited in the pool
// longer than podMaxInUnschedulable, whatever their plugins registered.
func (p *PriorityQueue) flushUnschedulablePodsLeftover(logger klog.Logger) {
	p.lock.Lock()
	defer p.lock.Unlock()
	now := p.clock.Now()
	var entities []framework.QueuedEntityInfo
	for _, e := range p.unschedulable {
		if now.Sub(timestampOf(e.entity)) > p.podMaxInUnschedulable {
			entities = append(entities, e.entity)
		}
	}
	if len(entities) > 0 {
		p.moveEntitiesToActiveOrBackoffQueue(logger, entities, EventUnschedulableTimeout, nil, nil)
	}
	p.updateMetrics()
}
