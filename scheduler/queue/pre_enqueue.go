package queue

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
)

// runPreEnqueuePlugins sets pInfo.GatingPlugin to the first PreEnqueue
// plugin that holds the pod, or clears it. The plugin that gated the pod
// last time is asked first: it is the likeliest to still say no.
func (p *PriorityQueue) runPreEnqueuePlugins(logger klog.Logger, pq *profileQueue, pInfo *framework.QueuedPodInfo) {
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
