package scheduler

import (
	"k8s.io/component-base/featuregate"
)

// OpportunisticBatching is upstream's feature gate of that name (beta, on
// by default since 1.35): identical pods reuse the previous cycle's
// filter and score results. It is the only kube-scheduler gate the
// operator lets people set; the others keep their 1.37 defaults.
const OpportunisticBatching featuregate.Feature = "OpportunisticBatching"

// NewFeatureGate returns the gates the operator's --feature-gates flag
// accepts, at upstream's defaults: OpportunisticBatching and, as every
// component-base gate set, AllAlpha and AllBeta, which set the gates of
// that stage not named explicitly (AllBeta sets OpportunisticBatching;
// AllAlpha sets nothing, there is no alpha gate here). It is a
// flag.Value; any other gate name is refused when the flag is parsed.
func NewFeatureGate() featuregate.MutableFeatureGate {
	fg := featuregate.NewFeatureGate()
	// Adding known specs to a new gate cannot fail.
	_ = fg.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		OpportunisticBatching: {Default: true, PreRelease: featuregate.Beta},
	})
	return fg
}

// WithOpportunisticBatching turns opportunistic batching on or off for
// every profile instance NewFramework builds (on by default).
func WithOpportunisticBatching(enabled bool) Option {
	return func(o *options) { o.disableBatching = !enabled }
}
