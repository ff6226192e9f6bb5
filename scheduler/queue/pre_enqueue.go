package queue

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
)

// runPreEnqueuePlugins runs the PreEnqueue plugins on e: on a single pod
// with pq's plugins, on each pod of a group with its own profile's. As
// upstream, every pod of a group is asked (each records its own gating
// plugin), and one gated pod gates the whole group, which takes that pod's
// gating plugin and events.
func (p *PriorityQueue) runPreEnqueuePlugins(logger klog.Logger, pq *profileQueue, e framework.QueuedEntityInfo) {
	g, ok := e.(*framework.QueuedPodGroupInfo)
	if !ok {
		p.runPreEnqueuePluginsForPod(logger, pq, e.(*framework.QueuedPodInfo))
		return
	}
	var gated *framework.QueuedPodInfo
	g.ForEachPodInfo(func(pInfo *framework.QueuedPodInfo) bool {
		if podPQ := p.profiles[pInfo.Pod.Spec.SchedulerName]; podPQ != nil {
			p.runPreEnqueuePluginsForPod(logger, podPQ, pInfo)
		}
		if pInfo.Gated() {
			gated = pInfo
		}
		return true
	})
	if gated != nil {
		g.GatingPlugin, g.GatingPluginEvents = gated.GatingPlugin, gated.GatingPluginEvents
		return
	}
	g.GatingPlugin, g.GatingPluginEvents = "", nil
}

// runPreEnqueuePluginsForPod sets pInfo.GatingPlugin to the first
// PreEnqueue plugin that holds the pod, or clears it. The plugin that gated
// the pod last time is asked first: it is the likeliest to still say no.
func (p *PriorityQueue) runPreEnqueuePluginsForPod(logger klog.Logger, pq *profileQueue, pInfo *framework.QueuedPodInfo) {
	if len(pq.preEnqueue) == 0 {
		pInfo.GatingPlugin = ""
		return
	}
	start := time.Now()
	code := framework.Success
	defer func() {
		p.metrics.FrameworkExtensionPointDuration.WithLabelValues(metrics.PreEnqueue, code.String(), pq.name).Observe(time.Since(start).Seconds())
	}()
	ctx := klog.NewContext(context.Background(), logger)
	if first := pq.preEnqueueByName[pInfo.GatingPlugin]; first != nil {
		if s := p.runPreEnqueuePlugin(ctx, logger, pq, first, pInfo); !s.IsSuccess() {
			code = s.Code()
			return
		}
	}
	for _, pl := range pq.preEnqueue {
		if pl.Name() == pInfo.GatingPlugin {
			continue
		}
		if s := p.runPreEnqueuePlugin(ctx, logger, pq, pl, pInfo); !s.IsSuccess() {
			code = s.Code()
			return
		}
	}
	pInfo.GatingPlugin = ""
	pInfo.GatingPluginEvents = nil
}

func (p *PriorityQueue) runPreEnqueuePlugin(ctx context.Context, logger klog.Logger, pq *profileQueue, pl framework.PreEnqueuePlugin, pInfo *framework.QueuedPodInfo) *framework.Status {
	s := pl.PreEnqueue(ctx, pInfo.Pod)
	if s.IsSuccess() {
		return s
	}
	if pInfo.UnschedulablePlugins == nil {
		pInfo.UnschedulablePlugins = sets.New[string]()
	}
	pInfo.UnschedulablePlugins.Insert(pl.Name())
	pInfo.GatingPlugin = pl.Name()
	pInfo.GatingPluginEvents = pq.pluginEvents[pl.Name()]
	if s.Code() == framework.Error {
		logger.Error(s.AsError(), "Unexpected error running PreEnqueue plugin", "pod", klog.KObj(pInfo.Pod), "plugin", pl.Name())
	} else {
		logger.V(4).Info("Status after running PreEnqueue plugin", "pod", klog.KObj(pInfo.Pod), "plugin", pl.Name(), "status", s.Message())
	}
	return s
}
