package runtime

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// gangSchedulingPlugin is the plugin upstream runs, alone, at PlacementFeasible.
const gangSchedulingPlugin = "GangScheduling"

// buildPodGroupPoints finishes the pod-group points once the plugins were
// built and the points resolved: PlacementScore weights, PlacementFeasible
// and the per-plugin observers of the points that are not profile sections.
func (f *frameworkImpl) buildPodGroupPoints(logger klog.Logger, plugins *configv1.Plugins) error {
	names := make([]string, len(f.placementScorePlugins))
	for i, p := range f.placementScorePlugins {
		names[i] = p.Name()
	}
	weights, err := scoreWeights(PlacementScore, plugins.PlacementScore.Enabled, plugins.MultiPoint.Enabled, names)
	if err != nil {
		return err
	}
	f.placementScorePluginWeight = weights

	// As upstream with GenericWorkload on, GangScheduling is the only
	// PlacementFeasible plugin.
	if f.workloadAware {
		if gs, ok := f.pluginsMap[gangSchedulingPlugin]; ok {
			p, ok := gs.(framework.PlacementFeasiblePlugin)
			if !ok {
				return &ConfigError{ExtensionPoint: PlacementFeasible, Plugin: gangSchedulingPlugin,
					Reason: "GenericWorkload is enabled, but GangScheduling plugin does not fulfill PlacementFeasiblePlugin interface"}
			}
			f.placementFeasiblePlugins = append(f.placementFeasiblePlugins, p)
		} else {
			logger.Error(nil, "GenericWorkload is enabled, but GangScheduling plugin is not set. Gang scheduling using PodGroups may not work as expected.")
		}
	}
	f.pluginObs[PlacementScoreExtensionNormalize] = observersFor(f.metrics, f.placementScorePlugins, PlacementScoreExtensionNormalize)
	f.pluginObs[PlacementFeasible] = observersFor(f.metrics, f.placementFeasiblePlugins, PlacementFeasible)
	return nil
}

// RunPlacementGeneratePlugins returns the placements podGroup is tried on:
// one with all nodes when the profile has no PlacementGenerate plugin, else
// those of the first plugin, as upstream (which runs only one).
func (f *frameworkImpl) RunPlacementGeneratePlugins(ctx context.Context, state framework.PodGroupCycleState, podGroup *framework.PodGroupInfo, nodes []*framework.NodeInfo) (_ []*framework.Placement, status *framework.Status) {
	defer f.observePoint(PlacementGenerate, time.Now(), &status)
	placement := &framework.Placement{Nodes: nodes}
	if len(f.placementGeneratePlugins) == 0 {
		return []*framework.Placement{placement}, nil
	}
	pl := f.placementGeneratePlugins[0]
	var result *framework.GeneratePlacementsResult
	s := f.runPlugin(state.ShouldRecordPluginMetrics(), PlacementGenerate, pl.Name(), func() (s *framework.Status) {
		result, s = pl.GeneratePlacements(ctx, state, podGroup, placement)
		return s
	})
	if !s.IsSuccess() {
		return nil, s.WithPlugin(pl.Name())
	}
	if result == nil || len(result.Placements) == 0 {
		return nil, framework.NewStatus(framework.Unschedulable, "no feasible placements found").WithPlugin(pl.Name())
	}
	return result.Placements, nil
}

// RunPlacementScorePlugins scores each of the placements whose assignments
// are given: ScorePlacement per placement in parallel, with
// placementStates[i] the state placement i was tried with, then
// NormalizePlacementScore per plugin, then weights. Scores must be within
// [MinScore, MaxScore] after normalizing.
func (f *frameworkImpl) RunPlacementScorePlugins(ctx context.Context, state framework.PodGroupCycleState, podGroupInfo *framework.PodGroupInfo, podGroupAssignments []*framework.PodGroupAssignments, placementStates []framework.PlacementCycleState) (_ []framework.PlacementPluginScores, status *framework.Status) {
	defer f.observePoint(PlacementScore, time.Now(), &status)
	if len(podGroupAssignments) != len(placementStates) {
		return nil, framework.AsStatus(fmt.Errorf("expected one PlacementCycleState per PodGroupAssignments, got %d placement states for %d assignments", len(placementStates), len(podGroupAssignments)))
	}
	plugins := f.placementScorePlugins
	numPlacements := len(podGroupAssignments)
	// scores[p][i] is plugin p's score of placement i.
	scores := make([][]framework.PlacementScore, len(plugins))
	for p := range plugins {
		scores[p] = make([]framework.PlacementScore, numPlacements)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if len(plugins) > 0 {
		var errs firstError
		f.parallelizer.Until(ctx, numPlacements, func(index int) {
			pga := podGroupAssignments[index]
			record := placementStates[index].ShouldRecordPluginMetrics()
			for p, pl := range plugins {
				var score int64
				s := f.runPlugin(record, PlacementScore, pl.Name(), func() (s *framework.Status) {
					score, s = pl.ScorePlacement(ctx, placementStates[index], podGroupInfo, pga)
					return s
				})
				if !s.IsSuccess() {
					errs.set(fmt.Errorf("plugin %q failed with: %w", pl.Name(), s.AsError()), cancel)
					return
				}
				scores[p][index] = framework.PlacementScore{Placement: pga.Placement, Score: score}
			}
		}, PlacementScore)
		if errs.err != nil {
			return nil, framework.AsStatus(fmt.Errorf("running PlacementScore plugins: %w", errs.err))
		}
	}

	var errs firstError
	record := state.ShouldRecordPluginMetrics()
	f.parallelizer.Until(ctx, len(plugins), func(p int) {
		pl := plugins[p]
		ext := pl.PlacementScoreExtensions()
		if ext == nil {
			return
		}
		s := f.runPlugin(record, PlacementScoreExtensionNormalize, pl.Name(), func() *framework.Status {
			return ext.NormalizePlacementScore(ctx, state, podGroupInfo, scores[p])
		})
		if !s.IsSuccess() {
			errs.set(fmt.Errorf("plugin %q failed with: %w", pl.Name(), s.AsError()), cancel)
		}
	}, PlacementScore)
	if errs.err != nil {
		return nil, framework.AsStatus(fmt.Errorf("running NormalizePlacementScore on PlacementScore plugins: %w", errs.err))
	}

	out := make([]framework.PlacementPluginScores, numPlacements)
	for index := range podGroupAssignments {
		pps := framework.PlacementPluginScores{
			Placement: podGroupAssignments[index].Placement,
			Scores:    make([]framework.PluginScore, len(plugins)),
		}
		for p, pl := range plugins {
			score := scores[p][index].Score
			if score > framework.MaxScore || score < framework.MinScore {
				err := fmt.Errorf("plugin %q returns an invalid score %v, it should in the range of [%v, %v] after normalizing", pl.Name(), score, framework.MinScore, framework.MaxScore)
				return nil, framework.AsStatus(fmt.Errorf("applying score defaultWeights on PlacementScore plugins: %w", err))
			}
			weighted := score * f.placementScorePluginWeight[pl.Name()]
			pps.Scores[p] = framework.PluginScore{Name: pl.Name(), Score: weighted}
			pps.TotalScore += weighted
		}
		out[index] = pps
	}
	return out, nil
}

// RunPodGroupPostFilterPlugins runs PodGroupPostFilter plugins until one
// succeeds or one says no later plugin can help (UnschedulableAndUnresolvable).
func (f *frameworkImpl) RunPodGroupPostFilterPlugins(ctx context.Context, state *framework.CycleState, podGroupInfo *framework.PodGroupInfo, pgSchedulingFunc framework.PodGroupSchedulingFunc) (_ *framework.PodGroupPostFilterResult, status *framework.Status) {
	if !f.workloadAware {
		// Upstream's answer with GenericWorkload off; here also that of a
		// profile that did not take up pod-group scheduling.
		return nil, framework.NewStatus(framework.Unschedulable, "generic workload feature is disabled, cannot perform PodGroupPostFilter")
	}
	defer f.observePoint(PodGroupPostFilter, time.Now(), &status)
	var reasons []string
	var rejector string
	record := state.ShouldRecordPluginMetrics()
	for _, pl := range f.podGroupPostFilterPlugins {
		var r *framework.PodGroupPostFilterResult
		s := f.runPlugin(record, PodGroupPostFilter, pl.Name(), func() (s *framework.Status) {
			r, s = pl.PodGroupPostFilter(ctx, state, podGroupInfo, pgSchedulingFunc)
			return s
		})
		switch {
		case s.IsSuccess():
			return r, s
		case s.Code() == framework.UnschedulableAndUnresolvable:
			return r, s.WithPlugin(pl.Name())
		case s.Code() == framework.Unschedulable:
			reasons = append(reasons, s.Reasons()...)
			if rejector == "" {
				rejector = pl.Name()
			}
		default:
			return nil, framework.AsStatus(fmt.Errorf("error in %q PodGroupPostFilter plugins: %s", pl.Name(), s.Message())).WithPlugin(pl.Name())
		}
	}
	return nil, framework.NewStatus(framework.Unschedulable, reasons...).WithPlugin(rejector)
}

// RunPlacementFeasiblePlugins asks the PlacementFeasible plugins whether
// the placement can still hold the group, after one more of its pods was
// tried: Success when all say so; Unschedulable as soon as one says never
// (the rest are not asked); Wait when one may once more pods are tried; any
// other status is an Error.
func (f *frameworkImpl) RunPlacementFeasiblePlugins(ctx context.Context, placementCycleState framework.PlacementCycleState, podGroupInfo *framework.PodGroupInfo, progress framework.PlacementProgress) (status *framework.Status) {
	defer f.observePoint(PlacementFeasible, time.Now(), &status)
	record := placementCycleState.ShouldRecordPluginMetrics()
	for _, pl := range f.placementFeasiblePlugins {
		s := f.runPlugin(record, PlacementFeasible, pl.Name(), func() *framework.Status {
			return pl.PlacementFeasible(ctx, placementCycleState, podGroupInfo, progress)
		})
		switch {
		case s.IsSuccess():
		case s.IsWait():
			status = s.WithPlugin(pl.Name())
		case s.Code() == framework.Unschedulable:
			return s.WithPlugin(pl.Name())
		case s.IsError():
			return framework.AsStatus(fmt.Errorf("running PlacementFeasible plugin: %w", s.AsError())).WithPlugin(pl.Name())
		default:
			return framework.AsStatus(fmt.Errorf("unexpected status from PlacementFeasible plugin: %v", s.Code())).WithPlugin(pl.Name())
		}
	}
	return status
}
