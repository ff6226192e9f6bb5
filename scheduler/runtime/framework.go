package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
)

// Option configures NewFramework.
type Option func(*frameworkOptions)

type frameworkOptions struct {
	clientSet                      clientset.Interface
	eventRecorder                  events.EventRecorderLogger
	informerFactory                informers.SharedInformerFactory
	draManager                     framework.SharedDRAManager
	snapshotSharedLister           framework.SharedLister
	podNominator                   framework.PodNominator
	podActivator                   framework.PodActivator
	waitingPodObservers            []framework.WaitingPodObserver
	podsInPreBind                  *PodsInPreBind
	parallelism                    int
	defaultPlugins                 *configv1.Plugins
	globalPercentageOfNodesToScore *int32
	metrics                        *metrics.Metrics
	extenders                      []configv1.Extender
	extenderPolicy                 extender.Policy
	extenderObserver               extender.Observer
	disableBatching                bool
	workloadGates                  WorkloadGates
	podGroupManager                framework.PodGroupManager
}

// WithClientSet sets the client plugins get from Handle.ClientSet.
func WithClientSet(c clientset.Interface) Option {
	return func(o *frameworkOptions) { o.clientSet = c }
}

// WithEventRecorder sets the recorder plugins get from Handle.EventRecorder.
func WithEventRecorder(r events.EventRecorderLogger) Option {
	return func(o *frameworkOptions) { o.eventRecorder = r }
}

// WithInformerFactory sets the informers plugins get from Handle.SharedInformerFactory.
func WithInformerFactory(f informers.SharedInformerFactory) Option {
	return func(o *frameworkOptions) { o.informerFactory = f }
}

// WithSharedDRAManager sets what plugins get from Handle.SharedDRAManager.
func WithSharedDRAManager(m framework.SharedDRAManager) Option {
	return func(o *frameworkOptions) { o.draManager = m }
}

// WithSnapshotSharedLister sets the snapshot the scheduler refreshes at the
// start of every cycle; PreFilter plugins receive its nodes.
func WithSnapshotSharedLister(l framework.SharedLister) Option {
	return func(o *frameworkOptions) { o.snapshotSharedLister = l }
}

// WithPodGroupManager sets what plugins get from Handle.PodGroupManager (the
// scheduler cache).
func WithPodGroupManager(m framework.PodGroupManager) Option {
	return func(o *frameworkOptions) { o.podGroupManager = m }
}

// WithPodNominator sets where nominated pods are tracked (the queue).
func WithPodNominator(n framework.PodNominator) Option {
	return func(o *frameworkOptions) { o.podNominator = n }
}

// WithPodActivator sets what Handle.Activate delegates to (the queue).
func WithPodActivator(a framework.PodActivator) Option {
	return func(o *frameworkOptions) { o.podActivator = a }
}

// WithWaitingPodObserver adds obs to those told about pods held at Permit,
// in the order the options were given.
func WithWaitingPodObserver(obs framework.WaitingPodObserver) Option {
	return func(o *frameworkOptions) { o.waitingPodObservers = append(o.waitingPodObservers, obs) }
}

// WithPodsInPreBind makes the instance register its pods in PreBind in
// m, shared with the other instances of the scheduler, so that preemption
// in any of them finds them, as upstream's shared map. Without it the
// instance keeps its own.
func WithPodsInPreBind(m *PodsInPreBind) Option {
	return func(o *frameworkOptions) { o.podsInPreBind = m }
}

// WithParallelism sets the goroutines used for Filter and Score; <= 0 means GOMAXPROCS.
func WithParallelism(p int) Option {
	return func(o *frameworkOptions) { o.parallelism = p }
}

// WithDefaultPlugins sets the plugins the profile is merged onto, with
// upstream's merge rules: a profile naming no plugins gets exactly these;
// one that enables a default plugin again overrides it in place (e.g. a
// new weight); disabled entries, including "*", remove defaults at that
// point. Without it the profile runs only the plugins it names.
func WithDefaultPlugins(p *configv1.Plugins) Option {
	return func(o *frameworkOptions) { o.defaultPlugins = p.DeepCopy() }
}

// WithMetrics sets the metrics the instance and its plugins observe (the
// scheduler's). Without it they go to metrics exported nowhere.
func WithMetrics(m *metrics.Metrics) Option {
	return func(o *frameworkOptions) { o.metrics = m }
}

// WithPercentageOfNodesToScore sets the scheduler-wide value used when the
// profile sets none (nil or 0 means adaptive).
func WithPercentageOfNodesToScore(p *int32) Option {
	return func(o *frameworkOptions) { o.globalPercentageOfNodesToScore = p }
}

// frameworkImpl is one profile's instance. Plugin slices and weights are
// written only in NewFramework and read-only afterwards, so the Run*
// methods take no locks; the waiting-pods map has its own lock.
type frameworkImpl struct {
	profileName                    string
	percentageOfNodesToScore       *int32
	globalPercentageOfNodesToScore *int32

	clientSet            clientset.Interface
	eventRecorder        events.EventRecorderLogger
	informerFactory      informers.SharedInformerFactory
	draManager           framework.SharedDRAManager
	snapshotSharedLister framework.SharedLister
	podNominator         framework.PodNominator
	podActivator         framework.PodActivator
	podGroupManager      framework.PodGroupManager
	waitingPodObservers  []framework.WaitingPodObserver
	parallelizer         framework.Parallelizer
	metrics              *metrics.Metrics

	pluginsMap        map[string]framework.Plugin
	enqueueExtensions []framework.EnqueueExtensions
	preEnqueuePlugins []framework.PreEnqueuePlugin
	queueSortPlugins  []framework.QueueSortPlugin
	preFilterPlugins  []framework.PreFilterPlugin
	filterPlugins     []framework.FilterPlugin
	postFilterPlugins []framework.PostFilterPlugin
	preScorePlugins   []framework.PreScorePlugin
	scorePlugins      []framework.ScorePlugin
	reservePlugins    []framework.ReservePlugin
	permitPlugins     []framework.PermitPlugin
	preBindPlugins    []framework.PreBindPlugin
	bindPlugins       []framework.BindPlugin
	postBindPlugins   []framework.PostBindPlugin

	// The pod-group points, built only with their gate on (WithWorkloadGates).
	placementGeneratePlugins  []framework.PlacementGeneratePlugin
	placementScorePlugins     []framework.PlacementScorePlugin
	podGroupPostFilterPlugins []framework.PodGroupPostFilterPlugin
	placementFeasiblePlugins  []framework.PlacementFeasiblePlugin
	// placementScorePluginWeight is the weight of each placementScorePlugins.
	placementScorePluginWeight map[string]int64

	// scoreWeights[i] is the weight of scorePlugins[i]; a slice, not a map,
	// because it is read once per (node, plugin).
	scoreWeights      []int64
	scorePluginWeight map[string]int64
	// permitMaxTimeouts[i] clamps the Wait timeout of permitPlugins[i].
	permitMaxTimeouts []time.Duration
	// gangPlugin is the Permit plugin that lets pods go only as a group,
	// if the profile runs one; it is told how its pods' holds change.
	gangPlugin framework.GangPermitPlugin
	// waitStarted are the Permit plugins told when a pod they hold waits.
	waitStarted []framework.WaitStartedPermitPlugin
	// workloadAware says whether the instance schedules pod groups (see
	// WorkloadAware).
	workloadAware bool

	// Observers are resolved per instance so the hot path neither hashes
	// label values nor allocates; see statusObserver.
	pointObs  map[string]*statusObserver
	pluginObs map[string]map[string]*statusObserver // point -> plugin -> observer
	// filterObs[i] and scoreObs[i] belong to filterPlugins[i] and
	// scorePlugins[i]: on sampled cycles they are used once per node, where
	// even a map lookup shows.
	filterObs []*statusObserver
	scoreObs  []*statusObserver

	waitingPods *waitingPodsMap
	// podsInPreBind are the pods whose binding cycle is in PreBind,
	// shared with the scheduler's other instances.
	podsInPreBind *PodsInPreBind

	// extenders are the profile's HTTP extenders, in the profile's order;
	// the instance owns and closes them. handleExtenders holds the same,
	// as the Handle gives them, made once so a cycle allocates nothing.
	extenders       []*extender.Extender
	handleExtenders []framework.Extender

	// batch keeps a cycle's results for the next pod with the same
	// signature; nil when opportunistic batching is off. signs tells
	// whether the instance signs pods, with signPlugins (see
	// computeBatchablePlugins). As upstream, an instance that batches but
	// cannot sign still runs the batch, which then only counts unsigned
	// pods in its metrics.
	batch       *opportunisticBatch
	signs       bool
	signPlugins []framework.SignPlugin

	// nodeScores recycles RunScorePlugins' score buffer (nodes × score
	// plugins, the largest allocation of a cycle) from one cycle to the next.
	nodeScores sync.Pool

	// pluginCtx is the context handed to plugin factories, and to the
	// gang plugin when a hold changes outside a scheduling cycle.
	pluginCtx context.Context
	// cancel ends pluginCtx.
	cancel    context.CancelFunc
	closeOnce sync.Once
	closed    atomic.Bool
}

var _ framework.Framework = (*frameworkImpl)(nil)

// NewFramework builds the instance of profile from the plugins in r. It
// merges the profile onto the default plugins (see WithDefaultPlugins),
// expands multiPoint, decodes args, calls the factories and checks the
// result; any refusal is a *ConfigError. The instance outlives ctx: plugins
// receive a context that keeps ctx's values and ends with Close.
func NewFramework(ctx context.Context, r Registry, profile *configv1.KubeSchedulerProfile, opts ...Option) (framework.Framework, error) {
	var o frameworkOptions
	for _, opt := range opts {
		opt(&o)
	}
	if profile == nil {
		profile = &configv1.KubeSchedulerProfile{}
	}
	defaults := o.defaultPlugins
	if defaults == nil {
		defaults = &configv1.Plugins{}
	}
	if o.metrics == nil {
		o.metrics = metrics.NewUnregistered()
	}
	if o.podsInPreBind == nil {
		o.podsInPreBind = NewPodsInPreBind()
	}
	plugins := mergePlugins(defaults, profile.Plugins.DeepCopy())

	f := &frameworkImpl{
		profileName:                    v1.DefaultSchedulerName,
		percentageOfNodesToScore:       profile.PercentageOfNodesToScore,
		globalPercentageOfNodesToScore: o.globalPercentageOfNodesToScore,
		clientSet:                      o.clientSet,
		eventRecorder:                  o.eventRecorder,
		informerFactory:                o.informerFactory,
		draManager:                     o.draManager,
		snapshotSharedLister:           o.snapshotSharedLister,
		podNominator:                   o.podNominator,
		podActivator:                   o.podActivator,
		podGroupManager:                o.podGroupManager,
		waitingPodObservers:            o.waitingPodObservers,
		parallelizer:                   framework.NewParallelizer(o.parallelism),
		metrics:                        o.metrics,
		pluginsMap:                     map[string]framework.Plugin{},
		waitingPods:                    newWaitingPodsMap(),
		podsInPreBind:                  o.podsInPreBind,
		pointObs:                       map[string]*statusObserver{},
		pluginObs:                      map[string]map[string]*statusObserver{},
	}
	if profile.SchedulerName != nil && *profile.SchedulerName != "" {
		f.profileName = *profile.SchedulerName
	}
	// Every problem found before a factory runs is reported, not only the
	// first: a user fixing a profile sees all its mistakes at once.
	var errs []error
	if p := profile.PercentageOfNodesToScore; p != nil && (*p < 0 || *p > 100) {
		errs = append(errs, &ConfigError{Reason: fmt.Sprintf("percentageOfNodesToScore %d is not in [0, 100]", *p)})
	}
	f.workloadAware = workloadAware(plugins, o.workloadGates)
	exts, err := extender.New(o.extenders, o.extenderPolicy, o.extenderObserver)
	if err != nil {
		errs = append(errs, &ConfigError{ExtensionPoint: "Extenders", Reason: err.Error()})
	}
	f.extenders = exts
	for _, e := range exts {
		f.handleExtenders = append(f.handleExtenders, e)
	}
	if len(exts) > 0 {
		// Extenders register no events: a pod some extender rejected
		// nodes for (its UnschedulablePlugins has extender.Name) is
		// requeued by any cluster event, as upstream.
		f.enqueueExtensions = append(f.enqueueExtensions, &defaultEnqueueExtension{pluginName: extender.Name, workloadAware: f.workloadAware})
	}

	if err := checkPodGroupPoints(profile.Plugins, r, o.workloadGates, f.workloadAware); err != nil {
		errs = append(errs, err)
	}

	// Refuse names that cannot resolve before running any factory, so a
	// typo never costs a plugin start-up.
	seenMulti := sets.New[string]()
	for _, p := range plugins.MultiPoint.Enabled {
		if reason, ok := unavailableReason(r, p.Name, o.workloadGates); ok {
			errs = append(errs, &ConfigError{ExtensionPoint: MultiPoint, Plugin: p.Name, Reason: reason})
		} else if seenMulti.Has(p.Name) {
			errs = append(errs, &ConfigError{ExtensionPoint: MultiPoint, Plugin: p.Name, Reason: "enabled more than once"})
		}
		seenMulti.Insert(p.Name)
	}
	points := activePoints(o.workloadGates, f.workloadAware)
	needed := enabledNames(plugins, points)
	for _, e := range points {
		for _, p := range e.set(plugins).Enabled {
			if reason, ok := unavailableReason(r, p.Name, o.workloadGates); ok {
				errs = append(errs, &ConfigError{ExtensionPoint: e.name, Plugin: p.Name, Reason: reason})
			}
		}
	}

	rawArgs := map[string]int{}
	for i, pc := range profile.PluginConfig {
		if _, dup := rawArgs[pc.Name]; dup {
			errs = append(errs, &ConfigError{ExtensionPoint: "PluginConfig", Plugin: pc.Name, Reason: "args given more than once"})
			continue
		}
		if !needed.Has(pc.Name) {
			errs = append(errs, &ConfigError{ExtensionPoint: "PluginConfig", Plugin: pc.Name, Reason: "args given for a plugin that is not enabled at any extension point"})
		}
		rawArgs[pc.Name] = i
	}

	// Sorted so factories run in a stable order (upstream iterates a map).
	// Every plugin's args are decoded and validated before any factory
	// runs, so a bad arg is reported as such and costs no plugin start-up.
	names := sets.List(needed)
	args := make([]k8sruntime.Object, len(names))
	for i, name := range names {
		reg, ok := r[name]
		if !ok {
			continue
		}
		var raw *configv1.PluginConfig
		if j, ok := rawArgs[name]; ok {
			raw = &profile.PluginConfig[j]
		}
		argsObj, err := decodeArgs(rawExtension(raw), reg.Args)
		if err != nil {
			errs = append(errs, &ConfigError{ExtensionPoint: "PluginConfig", Plugin: name, Reason: err.Error()})
		}
		args[i] = argsObj
	}
	if len(errs) > 0 {
		f.closeExtenders()
		if len(errs) == 1 {
			return nil, errs[0]
		}
		return nil, errors.Join(errs...)
	}

	logger := klog.FromContext(ctx).WithValues("profile", f.profileName)
	pluginCtx, cancel := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), logger))
	f.pluginCtx, f.cancel = pluginCtx, cancel
	ok := false
	defer func() {
		if !ok {
			_ = f.closePlugins()
			f.closeExtenders()
			cancel()
		}
	}()

	for i, name := range names {
		p, err := r[name].Factory(pluginCtx, args[i], f)
		if err != nil {
			return nil, &ConfigError{Plugin: name, Reason: fmt.Sprintf("initializing: %v", err)}
		}
		if p == nil {
			return nil, &ConfigError{Plugin: name, Reason: "factory returned no plugin"}
		}
		f.pluginsMap[name] = p
		f.fillEnqueueExtensions(p)
	}

	for _, e := range points {
		names, err := resolvePoint(e, plugins, f.pluginsMap)
		if err != nil {
			return nil, err
		}
		obs := map[string]*statusObserver{}
		for _, n := range names {
			e.add(f, f.pluginsMap[n])
			obs[n] = newPluginObserver(f.metrics, n, e.name)
		}
		f.pluginObs[e.name] = obs
	}
	// Points that run per plugin but are not profile sections of their own.
	f.pluginObs[PreFilterExtensionAddPod] = observersFor(f.metrics, f.preFilterPlugins, PreFilterExtensionAddPod)
	f.pluginObs[PreFilterExtensionRemovePod] = observersFor(f.metrics, f.preFilterPlugins, PreFilterExtensionRemovePod)
	f.pluginObs[ScoreExtensionNormalize] = observersFor(f.metrics, f.scorePlugins, ScoreExtensionNormalize)
	f.pluginObs[Unreserve] = observersFor(f.metrics, f.reservePlugins, Unreserve)
	f.pluginObs[PreBindPreFlight] = observersFor(f.metrics, f.preBindPlugins, PreBindPreFlight)
	if !o.disableBatching {
		f.batch = &opportunisticBatch{f: f}
		f.computeBatchablePlugins(logger)
		f.pluginObs[Sign] = observersFor(f.metrics, f.signPlugins, Sign)
	}
	for _, p := range f.filterPlugins {
		f.filterObs = append(f.filterObs, f.pluginObs[Filter][p.Name()])
	}
	for _, p := range f.scorePlugins {
		f.scoreObs = append(f.scoreObs, f.pluginObs[Score][p.Name()])
	}
	for _, point := range []string{Sign, PreFilter, Filter, PostFilter, PreScore, Score, Reserve, Unreserve, Permit, PreBindPreFlight, PreBind, Bind, PostBind,
		PlacementGenerate, PlacementFeasible, PlacementScore, PodGroupPostFilter} {
		f.pointObs[point] = newExtensionPointObserver(f.metrics, point, f.profileName)
	}

	if len(f.queueSortPlugins) != 1 {
		return nil, &ConfigError{ExtensionPoint: QueueSort, Plugin: pluginNames(f.queueSortPlugins),
			Reason: fmt.Sprintf("exactly one QueueSort plugin is required, got %d", len(f.queueSortPlugins))}
	}
	if len(f.bindPlugins) == 0 {
		return nil, &ConfigError{ExtensionPoint: Bind, Reason: "at least one Bind plugin is required"}
	}

	scoreNames := make([]string, len(f.scorePlugins))
	for i, p := range f.scorePlugins {
		scoreNames[i] = p.Name()
	}
	weights, err := scoreWeights(Score, plugins.Score.Enabled, plugins.MultiPoint.Enabled, scoreNames)
	if err != nil {
		return nil, err
	}
	f.scorePluginWeight = weights
	f.scoreWeights = make([]int64, len(scoreNames))
	for i, n := range scoreNames {
		f.scoreWeights[i] = weights[n]
	}

	if err := f.buildPodGroupPoints(logger, plugins); err != nil {
		return nil, err
	}

	f.permitMaxTimeouts = make([]time.Duration, len(f.permitPlugins))
	for i, p := range f.permitPlugins {
		f.permitMaxTimeouts[i] = framework.MaxPermitTimeout
		if ext, ok := p.(framework.PermitTimeoutExtension); ok && ext.MaxPermitTimeout() > 0 {
			f.permitMaxTimeouts[i] = ext.MaxPermitTimeout()
		}
		if g, ok := p.(framework.GangPermitPlugin); ok {
			if f.gangPlugin != nil {
				return nil, &ConfigError{ExtensionPoint: Permit, Plugin: f.gangPlugin.Name() + ", " + g.Name(),
					Reason: "at most one Permit plugin may hold pods as a group: each would wait for the other"}
			}
			f.gangPlugin = g
		}
		if w, ok := p.(framework.WaitStartedPermitPlugin); ok {
			f.waitStarted = append(f.waitStarted, w)
		}
	}

	ok = true
	logger.V(2).Info("Built framework instance", "plugins", f.ListPlugins())
	return f, nil
}

func rawExtension(pc *configv1.PluginConfig) *k8sruntime.RawExtension {
	if pc == nil {
		return nil
	}
	return &pc.Args
}

func observersFor[T framework.Plugin](m *metrics.Metrics, ps []T, point string) map[string]*statusObserver {
	out := make(map[string]*statusObserver, len(ps))
	for _, p := range ps {
		out[p.Name()] = newPluginObserver(m, p.Name(), point)
	}
	return out
}

// fillEnqueueExtensions registers the events of plugins that can reject
// pods. Plugins that do not say which events matter get every event, as
// upstream does, so their pods are never stuck.
func (f *frameworkImpl) fillEnqueueExtensions(p framework.Plugin) {
	switch p.(type) {
	case framework.PreEnqueuePlugin, framework.PreFilterPlugin, framework.FilterPlugin, framework.ReservePlugin, framework.PermitPlugin:
	default:
		return
	}
	if ext, ok := p.(framework.EnqueueExtensions); ok {
		f.enqueueExtensions = append(f.enqueueExtensions, ext)
		return
	}
	f.enqueueExtensions = append(f.enqueueExtensions, &defaultEnqueueExtension{pluginName: p.Name(), workloadAware: f.workloadAware})
}

// defaultEnqueueExtension registers every event for a plugin that names
// none: those of every resource, and PodGroup's in a workload-aware
// instance, as upstream adds them with GenericWorkload on.
type defaultEnqueueExtension struct {
	pluginName    string
	workloadAware bool
}

var _ framework.EnqueueExtensions = (*defaultEnqueueExtension)(nil)

func (p *defaultEnqueueExtension) Name() string { return p.pluginName }

func (p *defaultEnqueueExtension) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	events := framework.UnrollWildCardResource()
	if p.workloadAware {
		events = append(events, framework.ClusterEventWithHint{Event: framework.ClusterEvent{Resource: framework.PodGroup, ActionType: framework.All}})
	}
	return events, nil
}

// ShouldSamplePluginMetrics picks the cycles whose plugin durations are
// observed; the scheduler passes the result to CycleState.SetRecordPluginMetrics.
func ShouldSamplePluginMetrics() bool {
	return rand.IntN(100) < PluginMetricsSamplePercent
}

// NumFeasibleNodesToFind is upstream's percentageOfNodesToScore rule: all
// nodes below 100; else the profile's percentage, else the global one, else
// adaptive max(5, 50 - nodes/125); never fewer than 100 nodes.
func NumFeasibleNodesToFind(profilePercentage, globalPercentage *int32, numAllNodes int32) int32 {
	const minFeasibleNodesToFind, minFeasibleNodesPercentageToFind = 100, 5
	if numAllNodes < minFeasibleNodesToFind {
		return numAllNodes
	}
	var percentage int32
	switch {
	case profilePercentage != nil:
		percentage = *profilePercentage
	case globalPercentage != nil:
		percentage = *globalPercentage
	}
	if percentage == 0 {
		percentage = max(int32(50)-numAllNodes/125, minFeasibleNodesPercentageToFind)
	}
	n := numAllNodes * percentage / 100
	if n < minFeasibleNodesToFind {
		return minFeasibleNodesToFind
	}
	return n
}

func (f *frameworkImpl) NumFeasibleNodesToFind(numAllNodes int32) int32 {
	return NumFeasibleNodesToFind(f.percentageOfNodesToScore, f.globalPercentageOfNodesToScore, numAllNodes)
}

// Close rejects pods still waiting at Permit, cancels the plugins' context
// and closes plugins that implement io.Closer. It is idempotent.
func (f *frameworkImpl) Close() error {
	var err error
	f.closeOnce.Do(func() {
		f.closed.Store(true)
		f.waitingPods.iterate(func(wp framework.WaitingPod) {
			wp.Reject("", "scheduling profile instance was retired")
		})
		err = f.closePlugins()
		f.closeExtenders()
		f.cancel()
	})
	return err
}

func (f *frameworkImpl) closePlugins() error {
	var errs []error
	for _, name := range sets.List(sets.KeySet(f.pluginsMap)) {
		if c, ok := f.pluginsMap[name].(io.Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("%s failed to close: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ListPlugins returns what runs at each extension point, with weights at Score.
func (f *frameworkImpl) ListPlugins() *configv1.Plugins {
	out := &configv1.Plugins{}
	list := func(set *configv1.PluginSet, names []string, weighted bool) {
		for _, n := range names {
			p := configv1.Plugin{Name: n}
			if weighted {
				w := int32(f.scorePluginWeight[n])
				p.Weight = &w
			}
			set.Enabled = append(set.Enabled, p)
		}
	}
	list(&out.PreEnqueue, names(f.preEnqueuePlugins), false)
	list(&out.QueueSort, names(f.queueSortPlugins), false)
	list(&out.PreFilter, names(f.preFilterPlugins), false)
	list(&out.Filter, names(f.filterPlugins), false)
	list(&out.PostFilter, names(f.postFilterPlugins), false)
	list(&out.PreScore, names(f.preScorePlugins), false)
	list(&out.Score, names(f.scorePlugins), true)
	list(&out.Reserve, names(f.reservePlugins), false)
	list(&out.Permit, names(f.permitPlugins), false)
	list(&out.PreBind, names(f.preBindPlugins), false)
	list(&out.Bind, names(f.bindPlugins), false)
	list(&out.PostBind, names(f.postBindPlugins), false)
	list(&out.PodGroupPostFilter, names(f.podGroupPostFilterPlugins), false)
	list(&out.PlacementGenerate, names(f.placementGeneratePlugins), false)
	for _, n := range names(f.placementScorePlugins) {
		w := int32(f.placementScorePluginWeight[n])
		out.PlacementScore.Enabled = append(out.PlacementScore.Enabled, configv1.Plugin{Name: n, Weight: &w})
	}
	return out
}

func names[T framework.Plugin](ps []T) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name()
	}
	return out
}

func (f *frameworkImpl) PreEnqueuePlugins() []framework.PreEnqueuePlugin  { return f.preEnqueuePlugins }
func (f *frameworkImpl) EnqueueExtensions() []framework.EnqueueExtensions { return f.enqueueExtensions }
func (f *frameworkImpl) QueueSortFunc() framework.LessFunc {
	return f.queueSortPlugins[0].Less
}
func (f *frameworkImpl) HasFilterPlugins() bool                       { return len(f.filterPlugins) > 0 }
func (f *frameworkImpl) HasPostFilterPlugins() bool                   { return len(f.postFilterPlugins) > 0 }
func (f *frameworkImpl) HasScorePlugins() bool                        { return len(f.scorePlugins) > 0 }
func (f *frameworkImpl) PercentageOfNodesToScore() *int32             { return f.percentageOfNodesToScore }
func (f *frameworkImpl) ProfileName() string                          { return f.profileName }
func (f *frameworkImpl) Parallelizer() framework.Parallelizer         { return f.parallelizer }
func (f *frameworkImpl) Metrics() *metrics.Metrics                    { return f.metrics }
func (f *frameworkImpl) SnapshotSharedLister() framework.SharedLister { return f.snapshotSharedLister }
func (f *frameworkImpl) ClientSet() clientset.Interface               { return f.clientSet }
func (f *frameworkImpl) EventRecorder() events.EventRecorderLogger    { return f.eventRecorder }
func (f *frameworkImpl) SharedInformerFactory() informers.SharedInformerFactory {
	return f.informerFactory
}

// MutableSnapshotSharedLister returns the snapshot if it can be mutated
// (the scheduler cache's can), else nil.
func (f *frameworkImpl) MutableSnapshotSharedLister() framework.MutableSnapshotSharedLister {
	m, _ := f.snapshotSharedLister.(framework.MutableSnapshotSharedLister)
	return m
}

func (f *frameworkImpl) SharedDRAManager() framework.SharedDRAManager {
	return f.draManager
}

func (f *frameworkImpl) PodGroupManager() framework.PodGroupManager {
	return f.podGroupManager
}

func (f *frameworkImpl) IterateOverWaitingPods(callback func(framework.WaitingPod)) {
	f.waitingPods.iterate(callback)
}

func (f *frameworkImpl) GetWaitingPod(uid types.UID) framework.WaitingPod {
	if wp := f.waitingPods.get(uid); wp != nil {
		return wp
	}
	return nil // not a typed nil
}

func (f *frameworkImpl) AllowWaitingPodsTogether(pluginName string, pods []framework.WaitingPod) bool {
	return allowTogether(pluginName, pods)
}

// waitAllowed tells the gang plugin that another plugin allowed one of the
// pods it holds.
func (f *frameworkImpl) waitAllowed(wp *waitingPod, pluginName string) {
	if g := f.gangPlugin; g != nil && g.Name() != pluginName {
		if held, _ := wp.HeldBy(g.Name()); held {
			g.HoldChanged(f.pluginCtx, wp)
		}
	}
}

// waitChanged tells the observer that a held pod's pending plugins or
// their messages changed.
func (f *frameworkImpl) waitChanged(wp *waitingPod) {
	for _, obs := range f.waitingPodObservers {
		obs.PodWaitChanged(f.profileName, wp)
	}
}

func (f *frameworkImpl) AddPodInPreBind(uid types.UID, cancel context.CancelCauseFunc) {
	f.podsInPreBind.add(uid, cancel)
}

func (f *frameworkImpl) GetPodInPreBind(uid types.UID) framework.PodInPreBind {
	if p := f.podsInPreBind.get(uid); p != nil {
		return p
	}
	return nil // not a typed nil
}

func (f *frameworkImpl) RemovePodInPreBind(uid types.UID) {
	f.podsInPreBind.remove(uid)
}

func (f *frameworkImpl) RejectWaitingPod(uid types.UID) bool {
	if wp := f.waitingPods.get(uid); wp != nil {
		return wp.Reject("", "removed")
	}
	return false
}

// PodNominator and PodActivator delegate to the queue when one was given.

func (f *frameworkImpl) AddNominatedPod(logger klog.Logger, pod *framework.PodInfo, ni *framework.NominatingInfo) {
	if f.podNominator != nil {
		f.podNominator.AddNominatedPod(logger, pod, ni)
	}
}

func (f *frameworkImpl) DeleteNominatedPodIfExists(pod *v1.Pod) {
	if f.podNominator != nil {
		f.podNominator.DeleteNominatedPodIfExists(pod)
	}
}

func (f *frameworkImpl) UpdateNominatedPod(logger klog.Logger, oldPod *v1.Pod, newPodInfo *framework.PodInfo) {
	if f.podNominator != nil {
		f.podNominator.UpdateNominatedPod(logger, oldPod, newPodInfo)
	}
}

func (f *frameworkImpl) NominatedPodsForNode(nodeName string) []*framework.PodInfo {
	if f.podNominator != nil {
		return f.podNominator.NominatedPodsForNode(nodeName)
	}
	return nil
}

func (f *frameworkImpl) Activate(logger klog.Logger, pods map[string]*v1.Pod) {
	if f.podActivator != nil {
		f.podActivator.Activate(logger, pods)
	}
}

// podPriority is used to pick nominated pods of equal or higher priority.
func podPriority(p *v1.Pod) int32 { return corev1helpers.PodPriority(p) }
