package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// firstError keeps the first error of parallel work and cancels the rest.
type firstError struct {
	once sync.Once
	err  error
}

func (e *firstError) set(err error, cancel func()) {
	e.once.Do(func() {
		e.err = err
		cancel()
	})
}

// observePoint observes the duration of an extension point since start
// with the code of the status it returned. Deferred at the start of a Run*
// method with the address of its named result, it reads the status only
// when the method returns; nil stands for a point without status.
func (f *frameworkImpl) observePoint(point string, start time.Time, status **framework.Status) {
	var s *framework.Status
	if status != nil {
		s = *status
	}
	f.pointObs[point].observe(s.Code(), time.Since(start))
}

// runPlugin calls run, one plugin's work at point, and on cycles sampled for
// plugin metrics (record) observes its duration with the status it returned.
// Filter and Score time their plugins themselves: they run per node, where
// one clock read per plugin matters.
func (f *frameworkImpl) runPlugin(record bool, point, plugin string, run func() *framework.Status) *framework.Status {
	if !record {
		return run()
	}
	start := time.Now()
	s := run()
	f.pluginObs[point][plugin].observe(s.Code(), time.Since(start))
	return s
}

// RunPreFilterPlugins follows upstream: UnschedulableAndUnresolvable and
// Error stop at once; Unschedulable is remembered while the remaining
// plugins still run (their CycleState is needed by preemption); Skip
// disables the plugin's Filter for this cycle; results are intersected and
// an empty intersection rejects the pod.
func (f *frameworkImpl) RunPreFilterPlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod) (_ *framework.PreFilterResult, status *framework.Status, _ sets.Set[string]) {
	defer f.observePoint(PreFilter, time.Now(), &status)
	skip := sets.New[string]()
	defer func() { state.SetSkipFilterPlugins(skip) }()
	var nodes []*framework.NodeInfo
	if f.snapshotSharedLister != nil {
		var err error
		if nodes, err = f.snapshotSharedLister.NodeInfos().List(); err != nil {
			return nil, framework.AsStatus(fmt.Errorf("getting all nodes: %w", err)), nil
		}
	}
	logger := klog.FromContext(ctx)
	var result *framework.PreFilterResult
	pluginsWithNodes := sets.New[string]()
	var returnStatus *framework.Status
	record := state.ShouldRecordPluginMetrics()
	for _, pl := range f.preFilterPlugins {
		var r *framework.PreFilterResult
		s := f.runPlugin(record, PreFilter, pl.Name(), func() (s *framework.Status) {
			r, s = pl.PreFilter(ctx, state, pod, nodes)
			return s
		})
		if s.IsSkip() {
			skip.Insert(pl.Name())
			continue
		}
		if !s.IsSuccess() {
			s.SetPlugin(pl.Name())
			switch s.Code() {
			case framework.UnschedulableAndUnresolvable:
				logger.V(4).Info("Pod rejected by PreFilter plugin", "pod", klog.KObj(pod), "plugin", pl.Name(), "status", s.Message())
				return nil, s, nil
			case framework.Unschedulable:
				logger.V(4).Info("Pod rejected by PreFilter plugin", "pod", klog.KObj(pod), "plugin", pl.Name(), "status", s.Message())
				returnStatus = s
				continue
			}
			return nil, framework.AsStatus(fmt.Errorf("running PreFilter plugin %q: %w", pl.Name(), s.AsError())).WithPlugin(pl.Name()), nil
		}
		if !r.AllNodes() {
			pluginsWithNodes.Insert(pl.Name())
		}
		result = result.Merge(r)
		if !result.AllNodes() && len(result.NodeNames) == 0 {
			msg := fmt.Sprintf("node(s) didn't satisfy plugin(s) %v simultaneously", sets.List(pluginsWithNodes))
			if len(pluginsWithNodes) == 1 {
				msg = fmt.Sprintf("node(s) didn't satisfy plugin %v", sets.List(pluginsWithNodes)[0])
			}
			return result, framework.NewStatus(framework.UnschedulableAndUnresolvable, msg), pluginsWithNodes
		}
	}
	return result, returnStatus, pluginsWithNodes
}

// RunPreFilterExtensionAddPod calls AddPod of PreFilter plugins that did not skip.
func (f *frameworkImpl) RunPreFilterExtensionAddPod(ctx context.Context, state *framework.CycleState, podToSchedule *v1.Pod, podInfoToAdd *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	return f.runPreFilterExtension(ctx, state, PreFilterExtensionAddPod, podToSchedule, podInfoToAdd, nodeInfo)
}

// RunPreFilterExtensionRemovePod calls RemovePod of PreFilter plugins that did not skip.
func (f *frameworkImpl) RunPreFilterExtensionRemovePod(ctx context.Context, state *framework.CycleState, podToSchedule *v1.Pod, podInfoToRemove *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	return f.runPreFilterExtension(ctx, state, PreFilterExtensionRemovePod, podToSchedule, podInfoToRemove, nodeInfo)
}

func (f *frameworkImpl) runPreFilterExtension(ctx context.Context, state *framework.CycleState, point string, podToSchedule *v1.Pod, pi *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	skip := state.GetSkipFilterPlugins()
	record := state.ShouldRecordPluginMetrics()
	for _, pl := range f.preFilterPlugins {
		ext := pl.PreFilterExtensions()
		if ext == nil || skip.Has(pl.Name()) {
			continue
		}
		op := "addPod"
		if point == PreFilterExtensionRemovePod {
			op = "removePod"
		}
		s := f.runPlugin(record, point, pl.Name(), func() *framework.Status {
			if point == PreFilterExtensionAddPod {
				return ext.AddPod(ctx, state, podToSchedule, pi, nodeInfo)
			}
			return ext.RemovePod(ctx, state, podToSchedule, pi, nodeInfo)
		})
		if !s.IsSuccess() {
			err := s.AsError()
			klog.FromContext(ctx).Error(err, "Plugin failed", "pod", klog.KObj(podToSchedule), "node", klog.KObj(nodeInfo.Node()), "operation", op, "plugin", pl.Name())
			if point == PreFilterExtensionAddPod {
				return framework.AsStatus(fmt.Errorf("running AddPod on PreFilter plugin %q: %w", pl.Name(), err))
			}
			return framework.AsStatus(fmt.Errorf("running RemovePod on PreFilter plugin %q: %w", pl.Name(), err))
		}
	}
	return nil
}

// RunFilterPlugins returns the first non-success of the Filter plugins on
// nodeInfo. It is called once per node from many goroutines: it allocates
// nothing on success and touches no lock.
func (f *frameworkImpl) RunFilterPlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) *framework.Status {
	skip := state.GetSkipFilterPlugins()
	record := state.ShouldRecordPluginMetrics()
	// On sampled cycles one clock read per plugin: the end of one plugin
	// is the start of the next.
	var last time.Time
	if record {
		last = time.Now()
	}
	for i, pl := range f.filterPlugins {
		if len(skip) > 0 && skip.Has(pl.Name()) {
			continue
		}
		var s *framework.Status
		if record {
			s = pl.Filter(ctx, state, pod, nodeInfo)
			now := time.Now()
			f.filterObs[i].observe(s.Code(), now.Sub(last))
			last = now
		} else {
			s = pl.Filter(ctx, state, pod, nodeInfo)
		}
		if !s.IsSuccess() {
			if !s.IsRejected() {
				// Filter plugins may only reject; anything else is an internal error.
				s = framework.AsStatus(fmt.Errorf("running %q filter plugin: %w", pl.Name(), statusError(s)))
			}
			s.SetPlugin(pl.Name())
			return s
		}
	}
	return nil
}

// statusError is s.AsError, or a description for codes AsError maps to nil
// (Wait, Skip) where a plugin was not supposed to return them.
func statusError(s *framework.Status) error {
	if err := s.AsError(); err != nil {
		return err
	}
	return fmt.Errorf("unexpected status %s", s.Code())
}

// RunFilterPluginsWithNominatedPods runs Filter twice when pods of equal or
// higher priority are nominated to the node: once with them added (they
// will take the room they were promised) and, if that passes, once without
// (filters such as pod affinity may only pass without them). The pod must
// fit both ways.
func (f *frameworkImpl) RunFilterPluginsWithNominatedPods(ctx context.Context, state *framework.CycleState, pod *v1.Pod, info *framework.NodeInfo) *framework.Status {
	var status *framework.Status
	podsAdded := false
	for i := 0; i < 2; i++ {
		stateToUse, infoToUse := state, info
		if i == 0 {
			var err error
			podsAdded, stateToUse, infoToUse, err = f.addNominatedPods(ctx, pod, state, info)
			if err != nil {
				return framework.AsStatus(err)
			}
		} else if !podsAdded || !status.IsSuccess() {
			break
		}
		status = f.RunFilterPlugins(ctx, stateToUse, pod, infoToUse)
		if !status.IsSuccess() && !status.IsRejected() {
			return status
		}
	}
	return status
}

func (f *frameworkImpl) addNominatedPods(ctx context.Context, pod *v1.Pod, state *framework.CycleState, info *framework.NodeInfo) (bool, *framework.CycleState, *framework.NodeInfo, error) {
	if f.podNominator == nil || info.Node() == nil {
		return false, state, info, nil
	}
	nominated := f.podNominator.NominatedPodsForNode(info.Node().Name)
	if len(nominated) == 0 {
		return false, state, info, nil
	}
	// Copies are made only for nodes with nominated pods, which are rare.
	infoOut := info.Snapshot()
	stateOut := state.Clone()
	added := false
	prio := podPriority(pod)
	for _, pi := range nominated {
		if podPriority(pi.Pod) >= prio && pi.Pod.UID != pod.UID {
			infoOut.AddPodInfo(pi)
			if s := f.RunPreFilterExtensionAddPod(ctx, stateOut, pod, pi, infoOut); !s.IsSuccess() {
				return false, state, info, s.AsError()
			}
			added = true
		}
	}
	return added, stateOut, infoOut, nil
}

// FindNodesThatPassFilters is upstream's findNodesThatPassFilters: nodes are
// checked in parallel from nodes[start] onwards (wrapping), and the search
// stops once numNodesToFind nodes passed. Rejections are collected under a
// lock, as upstream does, rather than in a slot per node: that would cost
// an allocation the size of the cluster every cycle, and most cycles
// reject few nodes.
func (f *frameworkImpl) FindNodesThatPassFilters(ctx context.Context, state *framework.CycleState, pod *v1.Pod, diagnosis *framework.Diagnosis, nodes []*framework.NodeInfo, start, numNodesToFind int) ([]*framework.NodeInfo, error) {
	numAllNodes := len(nodes)
	if numAllNodes == 0 || numNodesToFind <= 0 {
		return nil, nil
	}
	numNodesToFind = min(numNodesToFind, numAllNodes)
	start = ((start % numAllNodes) + numAllNodes) % numAllNodes
	feasible := make([]*framework.NodeInfo, numNodesToFind)
	if !f.HasFilterPlugins() {
		for i := range feasible {
			feasible[i] = nodes[(start+i)%numAllNodes]
		}
		return feasible, nil
	}

	begin := time.Now()
	code := framework.Success
	defer func() { f.pointObs[Filter].observe(code, time.Since(begin)) }()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var errs firstError
	var found atomic.Int32
	type rejection struct {
		node   *framework.NodeInfo
		status *framework.Status
	}
	var rejected struct {
		sync.Mutex
		list []rejection
	}
	want := int32(numNodesToFind)
	check := func(i int) {
		ni := nodes[(start+i)%numAllNodes]
		s := f.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
		switch {
		case s.Code() == framework.Error:
			errs.set(s.AsError(), cancel)
		case s.IsSuccess():
			n := found.Add(1)
			if n > want {
				cancel()
				found.Add(-1)
			} else {
				feasible[n-1] = ni
			}
		default:
			rejected.Lock()
			rejected.list = append(rejected.list, rejection{node: ni, status: s})
			rejected.Unlock()
		}
	}
	f.parallelizer.Until(ctx, numAllNodes, check, Filter)
	feasible = feasible[:found.Load()]
	for _, r := range rejected.list {
		diagnosis.NodeToStatus.Set(r.node.Node().Name, r.status)
		diagnosis.AddPluginStatus(r.status)
	}
	if errs.err != nil {
		code = framework.Error
		return feasible, errs.err
	}
	return feasible, nil
}

// RunPostFilterPlugins runs PostFilter plugins until one returns Success,
// UnschedulableAndUnresolvable or Error. Otherwise it returns Unschedulable
// with every plugin's reasons, the first rejecting plugin, and the last
// result that nominated a node.
func (f *frameworkImpl) RunPostFilterPlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, m framework.NodeToStatusReader) (_ *framework.PostFilterResult, status *framework.Status) {
	defer f.observePoint(PostFilter, time.Now(), &status)
	if state.ShouldSkipAllPostFilterPlugins() {
		return nil, framework.NewStatus(framework.Unschedulable, "All PostFilter plugins are skipped")
	}
	var result *framework.PostFilterResult
	var reasons []string
	var rejector string
	record := state.ShouldRecordPluginMetrics()
	for _, pl := range f.postFilterPlugins {
		var r *framework.PostFilterResult
		s := f.runPlugin(record, PostFilter, pl.Name(), func() (s *framework.Status) {
			r, s = pl.PostFilter(ctx, state, pod, m)
			return s
		})
		switch {
		case s.IsSuccess():
			return r, s
		case s.Code() == framework.UnschedulableAndUnresolvable:
			return r, s.WithPlugin(pl.Name())
		case !s.IsRejected():
			return nil, framework.AsStatus(s.AsError()).WithPlugin(pl.Name())
		case r != nil && r.Mode() != framework.ModeNoop:
			result = r
		}
		reasons = append(reasons, s.Reasons()...)
		if rejector == "" {
			rejector = pl.Name()
		}
	}
	return result, framework.NewStatus(framework.Unschedulable, reasons...).WithPlugin(rejector)
}

// RunPreScorePlugins runs PreScore plugins; Skip disables the plugin's Score
// for this cycle, anything but Success or Skip fails the pod.
func (f *frameworkImpl) RunPreScorePlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) (status *framework.Status) {
	defer f.observePoint(PreScore, time.Now(), &status)
	skip := sets.New[string]()
	defer func() { state.SetSkipScorePlugins(skip) }()
	record := state.ShouldRecordPluginMetrics()
	for _, pl := range f.preScorePlugins {
		s := f.runPlugin(record, PreScore, pl.Name(), func() *framework.Status { return pl.PreScore(ctx, state, pod, nodes) })
		if s.IsSkip() {
			skip.Insert(pl.Name())
			continue
		}
		if !s.IsSuccess() {
			return framework.AsStatus(fmt.Errorf("running PreScore plugin %q: %w", pl.Name(), s.AsError()))
		}
	}
	return nil
}

// activeScorePlugin is a Score plugin that runs this cycle with what the hot
// path needs of it; one slice rather than one per field: this is built
// every cycle.
type activeScorePlugin struct {
	framework.ScorePlugin
	weight int64
	obs    *statusObserver
}

// scorePluginsToRun returns the Score plugins PreScore did not skip.
func (f *frameworkImpl) scorePluginsToRun(state *framework.CycleState) []activeScorePlugin {
	skip := state.GetSkipScorePlugins()
	plugins := make([]activeScorePlugin, 0, len(f.scorePlugins))
	for i, pl := range f.scorePlugins {
		if skip.Has(pl.Name()) {
			continue
		}
		plugins = append(plugins, activeScorePlugin{ScorePlugin: pl, weight: f.scoreWeights[i], obs: f.scoreObs[i]})
	}
	return plugins
}

// scoreBuffer returns a cleared buffer of n scores from the pool; put it
// back with f.nodeScores.Put. It is cleared so that a cycle cancelled
// halfway reads zeros, as with a new one, not scores of an earlier cycle.
func (f *frameworkImpl) scoreBuffer(n int) *[]framework.NodeScore {
	buf, _ := f.nodeScores.Get().(*[]framework.NodeScore)
	if buf == nil {
		buf = new([]framework.NodeScore)
	}
	if cap(*buf) < n {
		*buf = make([]framework.NodeScore, n)
	}
	*buf = (*buf)[:n]
	clear(*buf)
	return buf
}

// RunScorePlugins scores nodes with every Score plugin that did not skip,
// normalizes, checks the 0..100 range and applies weights. Raw scores for
// all (plugin, node) pairs live in one pooled buffer; each node's weighted
// breakdown, and its raw one when the cycle keeps raw scores for
// opportunistic batching, are windows of one more allocation each.
func (f *frameworkImpl) RunScorePlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodes []*framework.NodeInfo) (_ []framework.NodePluginScores, status *framework.Status) {
	defer f.observePoint(Score, time.Now(), &status)
	plugins := f.scorePluginsToRun(state)
	numNodes, numPlugins := len(nodes), len(plugins)
	buf := f.scoreBuffer(numPlugins * numNodes)
	defer f.nodeScores.Put(buf)
	all := *buf

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var errs firstError
	record := state.ShouldRecordPluginMetrics()

	if numPlugins > 0 {
		f.parallelizer.Until(ctx, numNodes, func(index int) {
			ni := nodes[index]
			name := ni.Node().Name
			var last time.Time
			if record {
				last = time.Now()
			}
			for p, pl := range plugins {
				score, s := pl.Score(ctx, state, pod, ni)
				if record {
					now := time.Now()
					pl.obs.observe(s.Code(), now.Sub(last))
					last = now
				}
				if !s.IsSuccess() {
					errs.set(fmt.Errorf("plugin %q failed with: %w", pl.Name(), s.AsError()), cancel)
					return
				}
				all[p*numNodes+index] = framework.NodeScore{Name: name, Score: score}
			}
		}, Score)
		if errs.err != nil {
			return nil, framework.AsStatus(fmt.Errorf("running Score plugins: %w", errs.err))
		}
	}

	out := make([]framework.NodePluginScores, numNodes)
	var raw []framework.PluginScore
	keep := state.ShouldKeepRawScores()
	if keep {
		raw = make([]framework.PluginScore, numNodes*numPlugins)
	}
	for index := range nodes {
		out[index].Name = nodes[index].Node().Name
		if !keep {
			continue
		}
		nps := &out[index]
		nps.RawScores = raw[index*numPlugins : (index+1)*numPlugins : (index+1)*numPlugins]
		for p, pl := range plugins {
			nps.RawScores[p] = framework.PluginScore{Name: pl.Name(), Score: all[p*numNodes+index].Score}
		}
	}
	if st := f.normalizeScores(ctx, state, pod, plugins, all, out); !st.IsSuccess() {
		return nil, st
	}
	return out, nil
}

// RunRawScorePlugins returns what each Score plugin that did not skip
// gives nodeInfo, before NormalizeScore and weights: opportunistic
// batching re-scores the node it chose last with it.
func (f *frameworkImpl) RunRawScorePlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) ([]framework.PluginScore, *framework.Status) {
	plugins := f.scorePluginsToRun(state)
	if len(plugins) == 0 {
		return nil, nil
	}
	scores := make([]framework.PluginScore, 0, len(plugins))
	// Timed on sampled cycles as RunScorePlugins, as upstream's
	// runRawScorePlugins does through runScorePlugin.
	record := state.ShouldRecordPluginMetrics()
	for _, pl := range plugins {
		var start time.Time
		if record {
			start = time.Now()
		}
		score, s := pl.Score(ctx, state, pod, nodeInfo)
		if record {
			pl.obs.observe(s.Code(), time.Since(start))
		}
		if !s.IsSuccess() {
			return nil, framework.AsStatus(fmt.Errorf("plugin %q failed with: %w", pl.Name(), s.AsError()))
		}
		scores = append(scores, framework.PluginScore{Name: pl.Name(), Score: score})
	}
	return scores, nil
}

// NormalizeScores sets Scores and TotalScore of scores from their RawScores,
// as RunScorePlugins does after scoring: NormalizeScore across all of them,
// range check, weights. A raw score of a plugin that does not run this
// cycle is ignored; a missing one counts as 0, as upstream.
func (f *frameworkImpl) NormalizeScores(ctx context.Context, state *framework.CycleState, pod *v1.Pod, scores []framework.NodePluginScores) *framework.Status {
	plugins := f.scorePluginsToRun(state)
	numNodes := len(scores)
	index := make(map[string]int, len(plugins))
	for p, pl := range plugins {
		index[pl.Name()] = p
	}
	buf := f.scoreBuffer(len(plugins) * numNodes)
	defer f.nodeScores.Put(buf)
	all := *buf
	for i, nps := range scores {
		for j, rs := range nps.RawScores {
			// Raw scores are in plugin order unless the plugins that run
			// changed since they were taken: look them up only then.
			p := j
			if p >= len(plugins) || plugins[p].Name() != rs.Name {
				var ok bool
				if p, ok = index[rs.Name]; !ok {
					continue
				}
			}
			all[p*numNodes+i] = framework.NodeScore{Name: nps.Name, Score: rs.Score}
		}
	}
	return f.normalizeScores(ctx, state, pod, plugins, all, scores)
}

// normalizeScores runs each plugin's NormalizeScore over its window of all
// (plugin-major, one entry per node of out), then writes the weighted
// scores and totals into out.
func (f *frameworkImpl) normalizeScores(ctx context.Context, state *framework.CycleState, pod *v1.Pod, plugins []activeScorePlugin, all []framework.NodeScore, out []framework.NodePluginScores) *framework.Status {
	numNodes, numPlugins := len(out), len(plugins)
	perPlugin := func(p int) framework.NodeScoreList { return all[p*numNodes : (p+1)*numNodes] }
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var errs firstError
	record := state.ShouldRecordPluginMetrics()
	f.parallelizer.Until(ctx, numPlugins, func(p int) {
		pl := plugins[p]
		ext := pl.ScoreExtensions()
		if ext == nil {
			return
		}
		s := f.runPlugin(record, ScoreExtensionNormalize, pl.Name(), func() *framework.Status { return ext.NormalizeScore(ctx, state, pod, perPlugin(p)) })
		if !s.IsSuccess() {
			errs.set(fmt.Errorf("plugin %q failed with: %w", pl.Name(), s.AsError()), cancel)
		}
	}, Score)
	if errs.err != nil {
		return framework.AsStatus(fmt.Errorf("running Normalize on Score plugins: %w", errs.err))
	}

	pluginScores := make([]framework.PluginScore, numNodes*numPlugins)
	for index := range out {
		nps := &out[index]
		nps.Scores = pluginScores[index*numPlugins : (index+1)*numPlugins : (index+1)*numPlugins]
		nps.TotalScore = 0
		for p, pl := range plugins {
			score := all[p*numNodes+index].Score
			if score > framework.MaxNodeScore || score < framework.MinNodeScore {
				return framework.AsStatus(fmt.Errorf("applying score defaultWeights on Score plugins: %w",
					fmt.Errorf("plugin %q returns an invalid score %v, it should in the range of [%v, %v] after normalizing", pl.Name(), score, framework.MinNodeScore, framework.MaxNodeScore)))
			}
			weighted := score * pl.weight
			nps.Scores[p] = framework.PluginScore{Name: pl.Name(), Score: weighted}
			nps.TotalScore += weighted
		}
	}
	return nil
}

// RunReservePluginsReserve runs Reserve in order and stops at the first
// failure; the caller then runs RunReservePluginsUnreserve.
func (f *frameworkImpl) RunReservePluginsReserve(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) (status *framework.Status) {
	defer f.observePoint(Reserve, time.Now(), &status)
	logger := klog.FromContext(ctx)
	record := state.ShouldRecordPluginMetrics()
	for _, pl := range f.reservePlugins {
		s := f.runPlugin(record, Reserve, pl.Name(), func() *framework.Status { return pl.Reserve(ctx, state, pod, nodeName) })
		if s.IsSuccess() {
			continue
		}
		if s.IsRejected() {
			logger.V(4).Info("Pod rejected by plugin", "pod", klog.KObj(pod), "plugin", pl.Name(), "status", s.Message())
			s.SetPlugin(pl.Name())
			return s
		}
		err := s.AsError()
		logger.Error(err, "Plugin failed", "plugin", pl.Name(), "pod", klog.KObj(pod))
		return framework.AsStatus(fmt.Errorf("running Reserve plugin %q: %w", pl.Name(), err))
	}
	return nil
}

// RunReservePluginsUnreserve runs Unreserve of every Reserve plugin in
// reverse order, so state built up in Reserve order is unwound LIFO.
func (f *frameworkImpl) RunReservePluginsUnreserve(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) {
	defer f.observePoint(Unreserve, time.Now(), nil)
	record := state.ShouldRecordPluginMetrics()
	for i := len(f.reservePlugins) - 1; i >= 0; i-- {
		pl := f.reservePlugins[i]
		f.runPlugin(record, Unreserve, pl.Name(), func() *framework.Status {
			pl.Unreserve(ctx, state, pod, nodeName)
			return nil
		})
	}
}

// RunPermitPlugins runs every Permit plugin. A rejection or error stops at
// once. If any plugin asked to wait (and none rejected), the pod becomes a
// waiting pod on nodeName with one timer per waiting plugin, each timeout
// clamped to the plugin's maximum, and Wait is returned; unless the gang
// plugin, told of the hold before the timers start, let the pod go with
// its group at once.
func (f *frameworkImpl) RunPermitPlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) (status *framework.Status) {
	defer f.observePoint(Permit, time.Now(), &status)
	logger := klog.FromContext(ctx)
	var waitStatus *framework.Status
	var waits map[string]permitWait
	record := state.ShouldRecordPluginMetrics()
	for i, pl := range f.permitPlugins {
		var timeout time.Duration
		s := f.runPlugin(record, Permit, pl.Name(), func() (s *framework.Status) {
			s, timeout = pl.Permit(ctx, state, pod, nodeName)
			return s
		})
		switch {
		case s.IsSuccess():
		case s.IsRejected():
			logger.V(4).Info("Pod rejected by plugin", "pod", klog.KObj(pod), "plugin", pl.Name(), "status", s.Message())
			return s.WithPlugin(pl.Name())
		case s.IsWait():
			if timeout > f.permitMaxTimeouts[i] {
				timeout = f.permitMaxTimeouts[i]
			}
			if waits == nil {
				waits = map[string]permitWait{}
			}
			waits[pl.Name()] = permitWait{timeout: timeout, message: s.Message()}
			waitStatus = s
		default:
			err := s.AsError()
			logger.Error(err, "Plugin failed", "plugin", pl.Name(), "pod", klog.KObj(pod))
			return framework.AsStatus(fmt.Errorf("running Permit plugin %q: %w", pl.Name(), err)).WithPlugin(pl.Name())
		}
	}
	if waitStatus.IsWait() {
		wp := newWaitingPod(pod, nodeName, waits, f.waitChanged, f.waitAllowed)
		f.waitingPods.add(wp)
		if f.heldByGang(waits) {
			// In the map first, so that a sibling's HoldChanged running
			// meanwhile can count the pod and let it go with the gang.
			// The timers start after: like upstream's last member, one
			// that completes its gang passes even with a zero timeout.
			f.gangPlugin.HoldChanged(ctx, wp)
			if wp.wasAllowed() {
				f.waitingPods.remove(pod.UID)
				return nil
			}
		}
		wp.arm()
		for _, pl := range f.waitStarted {
			if _, ok := waits[pl.Name()]; ok {
				pl.WaitStarted(ctx, wp)
			}
		}
		for _, obs := range f.waitingPodObservers {
			obs.PodWaiting(f.profileName, wp)
		}
		if f.closed.Load() {
			wp.Reject("", "scheduling profile instance was retired")
		}
		logger.V(4).Info("One or more plugins asked to wait and no plugin rejected pod", "pod", klog.KObj(pod))
		waitStatus.AppendReason("one or more plugins asked to wait and no plugin rejected pod")
		return waitStatus
	}
	return nil
}

// heldByGang reports whether the gang plugin is among the plugins in waits.
func (f *frameworkImpl) heldByGang(waits map[string]permitWait) bool {
	if f.gangPlugin == nil {
		return false
	}
	_, ok := waits[f.gangPlugin.Name()]
	return ok
}

// WillWaitOnPermit reports whether pod is a waiting pod of this instance.
func (f *frameworkImpl) WillWaitOnPermit(_ context.Context, pod *v1.Pod) bool {
	return f.waitingPods.get(pod.UID) != nil
}

// WaitOnPermit blocks until the waiting pod is resolved: nil when every
// plugin allowed it, the rejection (Unschedulable, naming the plugin)
// otherwise. If ctx ends first the pod is rejected so no timer outlives
// the wait. The pod leaves the waiting-pods map when this returns.
func (f *frameworkImpl) WaitOnPermit(ctx context.Context, pod *v1.Pod) *framework.Status {
	wp := f.waitingPods.get(pod.UID)
	if wp == nil {
		return nil
	}
	defer f.waitingPods.remove(pod.UID)
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Pod waiting on permit", "pod", klog.KObj(pod))
	start := time.Now()
	var s *framework.Status
	select {
	case s = <-wp.s:
	case <-ctx.Done():
		// Resolve it ourselves; if something else resolved it first its
		// status is already in the channel.
		wp.Preempt("", fmt.Sprintf("stopped waiting on permit: %v", context.Cause(ctx)))
		s = <-wp.s
	}
	f.metrics.PermitWaitDuration.WithLabelValues(s.Code().String()).Observe(time.Since(start).Seconds())
	for _, obs := range f.waitingPodObservers {
		obs.PodResolved(f.profileName, pod, wp.resolution, s)
	}
	if s.IsSuccess() {
		return nil
	}
	if s.IsRejected() {
		logger.V(4).Info("Pod rejected while waiting on permit", "pod", klog.KObj(pod), "status", s.Message())
		return s
	}
	err := s.AsError()
	logger.Error(err, "Failed waiting on permit for pod", "pod", klog.KObj(pod))
	return framework.AsStatus(fmt.Errorf("waiting on permit for pod: %w", err)).WithPlugin(s.Plugin())
}

// RunPreBindPreFlights returns Success if some PreBind plugin has work for
// the pod, Skip if none has, Error on failure; plugins that skip are
// recorded so RunPreBindPlugins does not call them.
func (f *frameworkImpl) RunPreBindPreFlights(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) (status *framework.Status) {
	defer f.observePoint(PreBindPreFlight, time.Now(), &status)
	skip := sets.New[string]()
	ret := framework.NewStatus(framework.Skip)
	record := state.ShouldRecordPluginMetrics()
	for _, pl := range f.preBindPlugins {
		s := f.runPlugin(record, PreBindPreFlight, pl.Name(), func() (s *framework.Status) {
			_, s = pl.PreBindPreFlight(ctx, state, pod, nodeName)
			return s
		})
		switch {
		case s.Code() == framework.Error:
			err := s.AsError()
			klog.FromContext(ctx).Error(err, "Plugin failed", "plugin", pl.Name(), "pod", klog.KObj(pod), "node", nodeName)
			return framework.AsStatus(fmt.Errorf("running PreBindPreFlight %q: %w", pl.Name(), err))
		case s.IsSuccess():
			ret = nil
		case s.IsSkip():
			skip.Insert(pl.Name())
		default:
			return framework.AsStatus(fmt.Errorf("PreBindPreFlight %s returned %q, which is unsupported. It is supposed to return Success, Skip, or Error status", pl.Name(), s.Code()))
		}
	}
	state.SetSkipPreBindPlugins(skip)
	return ret
}

// RunPreBindPlugins runs, in order, the PreBind plugins that did not skip
// in RunPreBindPreFlights, stopping at the first failure.
func (f *frameworkImpl) RunPreBindPlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) (status *framework.Status) {
	defer f.observePoint(PreBind, time.Now(), &status)
	logger := klog.FromContext(ctx)
	skip := state.GetSkipPreBindPlugins()
	record := state.ShouldRecordPluginMetrics()
	for _, pl := range f.preBindPlugins {
		if skip.Has(pl.Name()) {
			continue
		}
		s := f.runPlugin(record, PreBind, pl.Name(), func() *framework.Status { return pl.PreBind(ctx, state, pod, nodeName) })
		if s.IsSuccess() {
			continue
		}
		if s.IsRejected() {
			logger.V(4).Info("Pod rejected by PreBind plugin", "pod", klog.KObj(pod), "node", nodeName, "plugin", pl.Name(), "status", s.Message())
			s.SetPlugin(pl.Name())
			return s
		}
		err := s.AsError()
		if errors.Is(err, context.Canceled) && context.Cause(ctx) != nil {
			err = context.Cause(ctx)
		}
		logger.Error(err, "Plugin failed", "plugin", pl.Name(), "pod", klog.KObj(pod), "node", nodeName)
		return framework.AsStatus(fmt.Errorf("running PreBind plugin %q: %w", pl.Name(), err))
	}
	return nil
}

// RunBindPlugins runs Bind plugins until one does not return Skip.
func (f *frameworkImpl) RunBindPlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) (status *framework.Status) {
	defer f.observePoint(Bind, time.Now(), &status)
	if len(f.bindPlugins) == 0 {
		return framework.NewStatus(framework.Skip, "")
	}
	logger := klog.FromContext(ctx)
	record := state.ShouldRecordPluginMetrics()
	for _, pl := range f.bindPlugins {
		status = f.runPlugin(record, Bind, pl.Name(), func() *framework.Status { return pl.Bind(ctx, state, pod, nodeName) })
		if status.IsSkip() {
			continue
		}
		if !status.IsSuccess() {
			if status.IsRejected() {
				logger.V(4).Info("Pod rejected by Bind plugin", "pod", klog.KObj(pod), "node", nodeName, "plugin", pl.Name(), "status", status.Message())
				status.SetPlugin(pl.Name())
				return status
			}
			err := status.AsError()
			logger.Error(err, "Plugin Failed", "plugin", pl.Name(), "pod", klog.KObj(pod), "node", nodeName)
			return framework.AsStatus(fmt.Errorf("running Bind plugin %q: %w", pl.Name(), err))
		}
		return status
	}
	return status
}

// RunPostBindPlugins tells PostBind plugins the pod is bound.
func (f *frameworkImpl) RunPostBindPlugins(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) {
	defer f.observePoint(PostBind, time.Now(), nil)
	record := state.ShouldRecordPluginMetrics()
	for _, pl := range f.postBindPlugins {
		f.runPlugin(record, PostBind, pl.Name(), func() *framework.Status {
			pl.PostBind(ctx, state, pod, nodeName)
			return nil
		})
	}
}
