package runtime

import (
	"context"
	"encoding/json"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// WithOpportunisticBatching turns opportunistic batching on or off for the
// instance: signing pods and reusing a cycle's results for the next pod
// with the same signature. It is on by default, as upstream's
// OpportunisticBatching feature gate (beta, on since 1.35).
func WithOpportunisticBatching(enabled bool) Option {
	return func(o *frameworkOptions) { o.disableBatching = !enabled }
}

// computeBatchablePlugins decides whether the instance signs pods, as
// upstream's: only if it has no extenders (they see no signature) and
// every PreFilter, Filter, PreScore and Score plugin is a SignPlugin.
//
// Unlike upstream, the plugins that refuse pods (PodTopologySpread,
// InterPodAffinity; the others fail only on errors, such as a spec that
// does not marshal) sign first: SignPod stops at the first refusal, and
// in the default profile
// PodTopologySpread's system default constraints refuse every pod, after
// the others would have computed their fragments in vain. The signature
// does not depend on the order: fragments go into a map by key, and the
// plugins that share a key give it the same value.
func (f *frameworkImpl) computeBatchablePlugins(logger klog.Logger) {
	var candidates []framework.Plugin
	for _, p := range f.preFilterPlugins {
		candidates = append(candidates, p)
	}
	for _, p := range f.filterPlugins {
		candidates = append(candidates, p)
	}
	for _, p := range f.preScorePlugins {
		candidates = append(candidates, p)
	}
	for _, p := range f.scorePlugins {
		candidates = append(candidates, p)
	}
	enable := true
	if len(f.extenders) > 0 {
		logger.V(2).Info("Disabling signatures for profile because it has extenders configured")
		enable = false
	}
	seen := sets.New[string]()
	unsupported := sets.New[string]()
	var refusers, signers []framework.SignPlugin
	for _, p := range candidates {
		if seen.Has(p.Name()) {
			continue
		}
		seen.Insert(p.Name())
		if s, ok := p.(framework.SignPlugin); ok {
			if p.Name() == podTopologySpread || p.Name() == interPodAffinity {
				refusers = append(refusers, s)
			} else {
				signers = append(signers, s)
			}
		} else {
			unsupported.Insert(p.Name())
		}
	}
	if unsupported.Len() > 0 {
		logger.V(2).Info("Disabling signatures for profile because plugins do not support it", "plugins", sets.List(unsupported))
		enable = false
	}
	if enable {
		f.signPlugins = append(refusers, signers...)
		f.signs = true
	}
}

// SignPod returns pod's signature for this instance, or nil when the
// instance does not sign pods or a plugin cannot sign this one. The
// signature is the JSON of every plugin's fragments by key, with the
// pod's schedulerName, as upstream's.
func (f *frameworkImpl) SignPod(ctx context.Context, pod *v1.Pod) framework.PodSignature {
	// Upstream's queue signs pods only with opportunistic batching on.
	if f.batch == nil {
		return nil
	}
	// As upstream, the extension point is observed as Success whatever the
	// plugins answered (upstream's status there is never assigned), also
	// when the instance cannot sign; each plugin's own code goes to its
	// plugin series.
	defer f.observePoint(Sign, time.Now(), nil)
	if !f.signs {
		return nil
	}
	logger := klog.FromContext(ctx)
	fragments := map[string]any{framework.SchedulerNameSignerName: pod.Spec.SchedulerName}
	for _, pl := range f.signPlugins {
		var frs []framework.SignFragment
		s := f.runPlugin(true, Sign, pl.Name(), func() (s *framework.Status) {
			frs, s = pl.SignPod(ctx, pod)
			return s
		})
		if !s.IsSuccess() {
			if s.Code() == framework.Error {
				logger.Error(s.AsError(), "SignPod failed for plugin", "plugin", pl.Name())
			}
			logger.V(5).Info("SignPod can't sign pod due to plugin", "plugin", pl.Name(), "status", s)
			return nil
		}
		for _, fr := range frs {
			fragments[fr.Key] = fr.Value
		}
	}
	b, err := json.Marshal(fragments)
	if err != nil {
		logger.Error(err, "SignPod failed to marshal signature object")
		return nil
	}
	return b
}
