package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	listersv1 "k8s.io/client-go/listers/core/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	internalcache "github.com/schedprofiles/profile-scheduler/scheduler/cache"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/dynamicresources"
	"github.com/schedprofiles/profile-scheduler/scheduler/profiles"
	"github.com/schedprofiles/profile-scheduler/scheduler/queue"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// maxConcurrentBindCalls bounds the Bind plugin calls in flight, as upstream's
// API dispatcher bounds its calls by the scheduler's parallelism (16 by
// default). When the scheduling cycles outrun the API server, unbounded
// bindings pile up beyond the API server's HTTP/2 streams per connection,
// and Go's client then dials a new TLS connection for nearly every extra
// request: in make bench that was a third of the operator's CPU, taken
// from the API server it waits for.
const maxConcurrentBindCalls = 16

// informerSyncTimeout bounds how long NewFramework waits for the informers
// that a new instance's plugins asked for.
const informerSyncTimeout = time.Minute

// Scheduler is the scheduling loop with everything it needs: informers,
// cache, queue, snapshot and the live profile set. Build it with New, add
// it to the manager (it is a leader-elected Runnable) and publish
// instances built with NewFramework into Profiles().
type Scheduler struct {
	client          clientset.Interface
	registry        runtime.Registry
	informerFactory informers.SharedInformerFactory
	podLister       listersv1.PodLister
	podInformer     cache.SharedIndexInformer
	nodeInformer    cache.SharedIndexInformer
	// podGroupHandler is the PodGroup informer's handler registration, set
	// by StartPodGroupInformer once the API server serves PodGroups; nil
	// until then. Guarded by mu.
	podGroupHandler cache.ResourceEventHandlerRegistration
	// workloadHandler, workloadLister and podGroupLister are set with
	// podGroupHandler (startWorkloadInformer). Guarded by mu.
	workloadHandler cache.ResourceEventHandlerRegistration
	workloadLister  schedulinglisters.WorkloadLister
	podGroupLister  schedulinglisters.PodGroupLister
	// workloadRecorder records the events on PodGroups about their
	// Workload, as the operator.
	workloadRecorder events.EventRecorderLogger
	// eventSources only feed the queue (and the plugins' listers): the
	// storage informers and those passed in with WithEventSource.
	eventSources []resourceInformer
	handlers     []cache.ResourceEventHandlerRegistration
	// draManager holds the ResourceClaims, ResourceSlices and DeviceClasses
	// of every profile instance, so that an allocation one profile made in
	// Reserve is seen by the next cycle whatever its profile.
	draManager *dynamicresources.Manager

	profiles    *profiles.Set
	cache       *internalcache.Cache
	queue       *queue.PriorityQueue
	broadcaster events.EventBroadcaster
	status      *statusUpdater
	// podGroupStatus writes the PodGroups' scheduling condition.
	podGroupStatus *podGroupStatusUpdater
	metrics        *metrics.Metrics
	unserved       *unservedPods
	// podsInPreBind is shared by every instance, so that preemption finds
	// a victim in PreBind whichever instance runs its binding cycle.
	podsInPreBind *runtime.PodsInPreBind

	parallelism              int
	percentageOfNodesToScore *int32
	disableBatching          bool
	workloadGates            runtime.WorkloadGates
	defaultPlugins           *configv1.Plugins
	extenderPolicy           extender.Policy

	// logger is the one New was given, for informer handlers, which get no context.
	logger klog.Logger
	// profileCtx carries logger to queue calls made from profile-set subscriptions.
	profileCtx context.Context

	// picker and its snapshot belong to the scheduling loop: only its
	// goroutine (and the Filter/Score workers of the cycle it runs)
	// touches them.
	picker nodePicker

	// mu guards informerCtx and started. informerCtx is set once the
	// informers run (see startInformers); NewFramework then starts and
	// waits for the informers new plugins asked for.
	mu          sync.Mutex
	informerCtx context.Context
	started     bool

	// informersSynced and progress feed the readiness and liveness checks.
	informersSynced atomic.Bool
	progress        cycleProgress

	// bindings counts binding goroutines, so Start returns only after the
	// bindings in flight finished.
	bindings sync.WaitGroup
	// bindSlots holds a token per Bind plugin call in flight (bind).
	bindSlots chan struct{}
	// unservedWarningDelay is how long an unserved pod of an own
	// schedulerName waits for its NoProfile event.
	unservedWarningDelay time.Duration

	// shadows are the running shadows, per schedulerName they shadow. The
	// pod handler reads the map without a lock; shadowsMu serializes
	// those who replace it (registerShadow, unregisterShadow).
	shadows   atomic.Pointer[map[string][]*Shadow]
	shadowsMu sync.Mutex
	// shadowSampleRate and shadowQueueLength bound each shadow's work.
	shadowSampleRate  float64
	shadowQueueLength int
}

var (
	_ manager.Runnable               = (*Scheduler)(nil)
	_ manager.LeaderElectionRunnable = (*Scheduler)(nil)
)

type options struct {
	informerFactory               informers.SharedInformerFactory
	profiles                      *profiles.Set
	parallelism                   int
	percentageOfNodesToScore      *int32
	defaultPlugins                *configv1.Plugins
	extenderPolicy                extender.Policy
	metrics                       *metrics.Metrics
	reservedSchedulerNames        []string
	ownSchedulerNamePrefixes      []string
	unservedWarningDelay          time.Duration
	podInitialBackoff             time.Duration
	podMaxBackoff                 time.Duration
	podMaxInUnschedulableDuration time.Duration
	assumedPodTTL                 time.Duration
	stalledCycleTimeout           time.Duration
	eventSources                  []resourceInformer
	shadowSampleRate              float64
	shadowQueueLength             int
	disableBatching               bool
	// genericWorkload and topologyAwareWorkload are upstream's workload
	// gates (WithWorkloadGates).
	genericWorkload       bool
	topologyAwareWorkload bool
}

// Option configures New.
type Option func(*options)

// WithEventSource reports every change that informer sees to the queue as a
// cluster event of resource, for plugins that registered it (e.g.
// Coscheduling's PodGroups). The caller runs the informer.
func WithEventSource(resource framework.EventResource, informer EventSource) Option {
	return func(o *options) {
		o.eventSources = append(o.eventSources, resourceInformer{resource: resource, informer: informer})
	}
}

// WithInformerFactory shares an informer factory with other components. Its
// pod informer should leave out terminal pods, as the default one does.
func WithInformerFactory(f informers.SharedInformerFactory) Option {
	return func(o *options) { o.informerFactory = f }
}

// WithProfiles sets the profile set to serve; by default New makes one.
func WithProfiles(s *profiles.Set) Option {
	return func(o *options) { o.profiles = s }
}

// WithParallelism sets the goroutines used for Filter and Score (default GOMAXPROCS).
func WithParallelism(p int) Option {
	return func(o *options) { o.parallelism = p }
}

// WithPercentageOfNodesToScore sets the scheduler-wide percentageOfNodesToScore,
// used by profiles that set none (0 means adaptive).
func WithPercentageOfNodesToScore(p int32) Option {
	return func(o *options) { o.percentageOfNodesToScore = &p }
}

// WithDefaultPlugins sets the plugins profiles are merged onto (e.g.
// plugins.DefaultPlugins()). Without it a profile runs only the plugins it
// names.
func WithDefaultPlugins(p *configv1.Plugins) Option {
	return func(o *options) { o.defaultPlugins = p.DeepCopy() }
}

// WithMetrics sets the metrics the loop, its queue, its instances and
// their plugins observe; build them with metrics.New on the registry that
// exports them. Without it they are exported nowhere.
func WithMetrics(m *metrics.Metrics) Option {
	return func(o *options) { o.metrics = m }
}

// WithReservedSchedulerNames names the schedulerNames other schedulers
// serve: their pods are not counted as unserved.
func WithReservedSchedulerNames(names ...string) Option {
	return func(o *options) { o.reservedSchedulerNames = names }
}

// WithOwnSchedulerNamePrefixes makes schedulerNames with one of prefixes
// the operator's own, even before a profile served them: their pods get
// the NoProfile event when no profile serves them.
func WithOwnSchedulerNamePrefixes(prefixes ...string) Option {
	return func(o *options) { o.ownSchedulerNamePrefixes = prefixes }
}

// WithUnservedWarningDelay sets how long a pod of one of the operator's
// own schedulerNames may stay unserved before it gets the NoProfile event
// (DefaultUnservedWarningDelay by default). The delay keeps a pod applied
// together with its profile from being warned about.
func WithUnservedWarningDelay(d time.Duration) Option {
	return func(o *options) { o.unservedWarningDelay = d }
}

// DefaultUnservedWarningDelay is how long an unserved pod of an own
// schedulerName waits before its NoProfile event.
const DefaultUnservedWarningDelay = 10 * time.Second

// WithPodBackoff sets the initial and maximum backoff of failed pods (1 s and 10 s by default).
func WithPodBackoff(initial, maxBackoff time.Duration) Option {
	return func(o *options) { o.podInitialBackoff, o.podMaxBackoff = initial, maxBackoff }
}

// WithPodMaxInUnschedulablePodsDuration sets how long an unschedulable pod
// waits for an event before it is retried anyway (5 minutes by default).
func WithPodMaxInUnschedulablePodsDuration(d time.Duration) Option {
	return func(o *options) { o.podMaxInUnschedulableDuration = d }
}

// WithAssumedPodTTL sets how long a pod whose binding finished may wait for
// the informer to show it bound before its resources are released.
func WithAssumedPodTTL(d time.Duration) Option {
	return func(o *options) { o.assumedPodTTL = d }
}

// WithExtenderPolicy sets what the profiles' extenders are allowed: the
// URLs they may be called at and the size of their replies. Without it
// a profile with extenders does not build.
func WithExtenderPolicy(p extender.Policy) Option {
	return func(o *options) { o.extenderPolicy = p }
}

// WithStalledCycleTimeout sets how long one scheduling cycle may run before
// CheckLoopProgress fails (DefaultStalledCycleTimeout by default). With an
// extender policy that allows extenders, New refuses a timeout not longer
// than extender.MaxCycleTime, what a profile's extenders may take in one
// cycle: a slow extender would have the liveness check restart the
// operator.
func WithStalledCycleTimeout(d time.Duration) Option {
	return func(o *options) { o.stalledCycleTimeout = d }
}

// New builds a scheduler that binds pods through client with instances of
// plugins from registry. ctx supplies the logger; the scheduler runs in Start.
func New(ctx context.Context, client clientset.Interface, registry runtime.Registry, opts ...Option) (*Scheduler, error) {
	if client == nil {
		return nil, errors.New("a client is required")
	}
	o := options{
		parallelism:                   framework.DefaultParallelism(),
		podInitialBackoff:             queue.DefaultPodInitialBackoffDuration,
		podMaxBackoff:                 queue.DefaultPodMaxBackoffDuration,
		podMaxInUnschedulableDuration: queue.DefaultPodMaxInUnschedulablePodsDuration,
		assumedPodTTL:                 internalcache.DefaultAssumedPodTTL,
		stalledCycleTimeout:           DefaultStalledCycleTimeout,
		unservedWarningDelay:          DefaultUnservedWarningDelay,
		shadowSampleRate:              DefaultShadowSampleRate,
		shadowQueueLength:             DefaultShadowQueueLength,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.extenderPolicy.AllowsAny() && o.stalledCycleTimeout <= extender.MaxCycleTime {
		return nil, fmt.Errorf("the stalled-cycle timeout %v must be longer than %v, what extenders may take in one scheduling cycle", o.stalledCycleTimeout, extender.MaxCycleTime)
	}
	logger := klog.FromContext(ctx).WithName("scheduler")
	if o.informerFactory == nil {
		o.informerFactory = newInformerFactory(client)
	}
	if o.profiles == nil {
		o.profiles = profiles.NewSet(logger)
	}
	if o.metrics == nil {
		o.metrics = metrics.NewUnregistered()
	}

	s := &Scheduler{
		client:                   client,
		registry:                 registry,
		informerFactory:          o.informerFactory,
		profiles:                 o.profiles,
		broadcaster:              events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()}),
		parallelism:              o.parallelism,
		percentageOfNodesToScore: o.percentageOfNodesToScore,
		disableBatching:          o.disableBatching,
		workloadGates:            runtime.WorkloadGates{GenericWorkload: o.genericWorkload, TopologyAwareWorkloadScheduling: o.topologyAwareWorkload},
		defaultPlugins:           o.defaultPlugins,
		extenderPolicy:           o.extenderPolicy,
		metrics:                  o.metrics,
		logger:                   logger,
		profileCtx:               klog.NewContext(context.Background(), logger),
		picker:                   nodePicker{snapshot: internalcache.NewEmptySnapshot()},
		bindSlots:                make(chan struct{}, maxConcurrentBindCalls),
		podsInPreBind:            runtime.NewPodsInPreBind(),
	}
	s.workloadRecorder = s.broadcaster.NewRecorder(scheme.Scheme, workloadEventSource)
	s.progress.timeout = o.stalledCycleTimeout
	s.unservedWarningDelay = o.unservedWarningDelay
	s.shadowSampleRate, s.shadowQueueLength = o.shadowSampleRate, o.shadowQueueLength
	// Terminal pods hold no resources: keeping them out of the informer
	// releases them (the watch reports a pod that turns terminal as deleted).
	s.podInformer = s.informerFactory.InformerFor(&v1.Pod{}, newPodInformer)
	s.podLister = s.informerFactory.Core().V1().Pods().Lister()
	s.nodeInformer = s.informerFactory.Core().V1().Nodes().Informer()
	draSources, draManager, err := newDRASources(ctx, client, s.informerFactory)
	if err != nil {
		return nil, err
	}
	s.draManager = draManager
	s.eventSources = append(append(newStorageInformers(s.informerFactory), draSources...), o.eventSources...)

	s.queue = queue.New(
		queue.WithPodLister(s.podLister),
		queue.WithPodInitialBackoffDuration(o.podInitialBackoff),
		queue.WithPodMaxBackoffDuration(o.podMaxBackoff),
		queue.WithPodMaxInUnschedulablePodsDuration(o.podMaxInUnschedulableDuration),
		queue.WithMetrics(o.metrics),
		// A workload-aware instance has its pod groups popped as one
		// entity, for the pod-group cycle (scheduleOnePodGroup).
		queue.WithWorkloadAwareProfiles(func(fwk framework.Framework) bool { return fwk.WorkloadAware() }),
	)
	s.unserved = newUnservedPods(o.metrics.UnservedPendingPods, s.queue.HasProfile, o.reservedSchedulerNames, o.ownSchedulerNamePrefixes)
	s.cache = internalcache.New(internalcache.WithAssumedPodTTL(o.assumedPodTTL), internalcache.WithExpiredPodHandler(s.requeueExpiredPod),
		internalcache.WithPodGroups(o.genericWorkload))
	s.status = newStatusUpdater(client, s.podLister)
	s.podGroupStatus = newPodGroupStatusUpdater(client, s.cache.PodGroups())

	if err := s.addEventHandlers(); err != nil {
		return nil, err
	}
	s.profiles.Subscribe(s.onProfileChange)
	// Series go once no instance of the profile is left, so that cycles
	// still finishing on a removed instance do not bring them back.
	s.profiles.OnRetired(s.metrics.DeleteProfile)
	// Instances published before the subscription.
	for _, name := range s.profiles.Names() {
		if fwk := s.profiles.Get(name); fwk != nil {
			s.onProfileChange(name, fwk)
		}
	}
	return s, nil
}

// newInformerFactory returns the factory New makes when none is passed in:
// no managedFields in any of its caches, pods' or others'. kube-scheduler
// drops them from pods too: often the largest part of an object and read
// by nothing here. Updates sent from a cached object leave the server's
// managedFields as they are (an update without them keeps them).
func newInformerFactory(cs clientset.Interface) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(ctrlcache.TransformStripManagedFields()))
}

func newPodInformer(cs clientset.Interface, resync time.Duration) cache.SharedIndexInformer {
	selector := fields.ParseSelectorOrDie(fmt.Sprintf("status.phase!=%v,status.phase!=%v", v1.PodSucceeded, v1.PodFailed))
	informer := coreinformers.NewFilteredPodInformer(cs, v1.NamespaceAll, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		func(o *metav1.ListOptions) { o.FieldSelector = selector.String() })
	// Set here too, as kube-scheduler does, for a factory passed in without
	// a transform (a factory's own transform replaces this one). It fails
	// only on a started informer, and this one is new.
	_ = informer.SetTransform(ctrlcache.TransformStripManagedFields())
	return informer
}

// Profiles returns the live profile set the loop serves.
func (s *Scheduler) Profiles() *profiles.Set { return s.profiles }

// ResourceClaims returns the ResourceClaims as the scheduler knows them,
// with the allocations its profiles made in Reserve and have not written
// yet: what the claims of a pod held at Permit would get.
func (s *Scheduler) ResourceClaims() framework.ResourceClaimTracker {
	return s.draManager.ResourceClaims()
}

// ExtenderPolicy returns what the profiles' extenders are allowed.
func (s *Scheduler) ExtenderPolicy() extender.Policy { return s.extenderPolicy }

// InformerFactory returns the informers the loop and the plugins share.
func (s *Scheduler) InformerFactory() informers.SharedInformerFactory { return s.informerFactory }

// NeedLeaderElection makes the manager run the loop on the elected leader only.
func (s *Scheduler) NeedLeaderElection() bool { return true }

// Registry returns the plugins profiles may use.
func (s *Scheduler) Registry() runtime.Registry { return s.registry }

// FrameworkOptions wire an instance of the profile serving schedulerName
// to this scheduler: its client, informers, snapshot, queue (as nominator
// and activator), an event recorder reporting as the profile's
// schedulerName, the scheduler's parallelism, percentageOfNodesToScore
// and opportunistic batching setting. profilebuild.Builder builds
// instances with them; publish the result with Profiles().Publish to make
// it serve.
func (s *Scheduler) FrameworkOptions(schedulerName string) []runtime.Option {
	if schedulerName == "" {
		schedulerName = v1.DefaultSchedulerName
	}
	all := []runtime.Option{
		runtime.WithClientSet(s.client),
		runtime.WithEventRecorder(s.broadcaster.NewRecorder(scheme.Scheme, schedulerName)),
		runtime.WithInformerFactory(s.informerFactory),
		runtime.WithSharedDRAManager(s.draManager),
		runtime.WithSnapshotSharedLister(s.picker.snapshot),
		runtime.WithPodNominator(s.queue),
		runtime.WithPodActivator(s.queue),
		runtime.WithParallelism(s.parallelism),
		runtime.WithPercentageOfNodesToScore(s.percentageOfNodesToScore),
		runtime.WithMetrics(s.metrics),
		runtime.WithExtenderPolicy(s.extenderPolicy),
		runtime.WithOpportunisticBatching(!s.disableBatching),
		runtime.WithPodsInPreBind(s.podsInPreBind),
		runtime.WithPodGroupManager(s.cache),
	}
	if s.defaultPlugins != nil {
		all = append(all, runtime.WithDefaultPlugins(s.defaultPlugins))
	}
	return all
}

// Synced starts the informers that plugin factories asked for and waits
// until they synced, so no plugin reads an empty lister. Before the
// informers run there is nothing to do: starting them starts these too.
func (s *Scheduler) Synced(ctx context.Context) error { return s.syncNewInformers(ctx) }

// syncNewInformers starts the informers that plugin factories asked for and
// waits until they synced, so no plugin reads an empty lister. Before the
// informers run there is nothing to do: starting them starts these too.
func (s *Scheduler) syncNewInformers(ctx context.Context) error {
	s.mu.Lock()
	informerCtx := s.informerCtx
	s.mu.Unlock()
	if informerCtx == nil {
		return nil
	}
	s.informerFactory.Start(informerCtx.Done())
	waitCtx, cancel := context.WithTimeout(ctx, informerSyncTimeout)
	defer cancel()
	var unsynced []string
	for typ, ok := range s.informerFactory.WaitForCacheSync(waitCtx.Done()) {
		if !ok {
			unsynced = append(unsynced, typ.String())
		}
	}
	if len(unsynced) > 0 {
		return fmt.Errorf("informers for %v did not sync within %v (may the operator list and watch them?)", unsynced, informerSyncTimeout)
	}
	return nil
}

// onProfileChange keeps the queue and the count of unserved pods in step
// with the profile set. A profile seen for the first time also picks up
// the pending pods that named it before it existed.
func (s *Scheduler) onProfileChange(name string, fwk framework.Framework) {
	logger := s.logger.WithValues("profile", name)
	defer s.unserved.refresh(name)
	if fwk == nil {
		s.queue.RemoveProfile(logger, name)
		logger.V(2).Info("Profile removed from the scheduling queue")
		return
	}
	if fwk.ProfileName() != name {
		logger.Error(nil, "Instance published under another schedulerName than its own; not serving it", "instanceProfile", fwk.ProfileName())
		return
	}
	isNew := !s.queue.HasProfile(name)
	s.queue.SetProfile(s.profileCtx, fwk)
	if !isNew {
		s.releaseHeldOtherWay(logger, name, fwk)
		logger.V(2).Info("Profile instance replaced")
		return
	}
	pods, err := s.podLister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing pods for a new profile")
		return
	}
	n := 0
	// The last pending member of each pod group, whose add event the
	// group's gang waits for (see below).
	lastMembers := map[framework.EntityKey]*v1.Pod{}
	for _, pod := range pods {
		if pod.Spec.SchedulerName == name && pod.Spec.NodeName == "" {
			// As the pod's add event would have, had the profile existed.
			s.cache.AddPodGroupMember(pod)
			s.queue.Add(logger, pod)
			n++
			if pgName, ok := framework.PodGroupNameOf(pod); ok && s.workloadGates.GenericWorkload {
				lastMembers[framework.PodGroupKey(pod.Namespace, pgName)] = pod
			}
		}
	}
	// A gang's first member gated the group until minCount members appear;
	// the pod add event that releases it (addPod) came before the profile
	// existed. One event per group, after all its members are queued.
	for _, pod := range lastMembers {
		s.queue.MoveAllToActiveOrBackoffQueue(logger, queue.EventUnscheduledPodAdd, nil, pod, nil)
	}
	logger.V(2).Info("Profile added to the scheduling queue", "pendingPods", n)
}

// releaseHeldOtherWay rejects back to the queue the pod group members that
// the previous instances of a profile hold at Permit when the profile
// became, or stopped being, workload-aware with fwk. SetProfile queues the
// pending members the new way; the held ones would otherwise still be let
// go the old way: one by one, each on its own approval, into what is now
// a gang, or held by GangScheduling for a quorum the profile no longer
// asks for, until its timeout. Other held pods stay held.
//
// A cycle that took the previous instance before the change and reaches
// Permit after this ran is caught by releaseIfHeldOtherWay.
func (s *Scheduler) releaseHeldOtherWay(logger klog.Logger, name string, fwk framework.Framework) {
	msg := heldOtherWayMessage(name, fwk)
	s.profiles.WaitingInRetiring(name, func(old framework.Framework, wp framework.WaitingPod) {
		if old.WorkloadAware() == fwk.WorkloadAware() {
			return
		}
		if _, ok := framework.PodGroupNameOf(wp.GetPod()); !ok {
			return
		}
		if wp.Reject("", msg) {
			logger.V(2).Info("Released a held pod group member back to the queue", "pod", klog.KObj(wp.GetPod()))
		}
	})
}

// releaseIfHeldOtherWay rejects pod, about to wait at Permit in fwk, when
// it is a pod group member and the instance now serving its profile
// schedules pod groups the other way: its cycle took fwk before the change
// was published, and reached Permit after releaseHeldOtherWay looked at
// fwk's waiting pods. The pod joins the waiting pods before this runs and
// the new instance is published before releaseHeldOtherWay runs, so one of
// the two sees it.
func (s *Scheduler) releaseIfHeldOtherWay(logger klog.Logger, fwk framework.Framework, pod *v1.Pod) {
	if _, ok := framework.PodGroupNameOf(pod); !ok {
		return
	}
	wp := fwk.GetWaitingPod(pod.UID)
	if wp == nil {
		return
	}
	cur := s.profiles.Get(fwk.ProfileName())
	if cur == nil || cur == fwk || cur.WorkloadAware() == fwk.WorkloadAware() {
		return
	}
	if wp.Reject("", heldOtherWayMessage(fwk.ProfileName(), cur)) {
		logger.V(2).Info("Released a held pod group member back to the queue", "pod", klog.KObj(pod))
	}
}

// heldOtherWayMessage is why a held member is released when profile name
// changes to fwk.
func heldOtherWayMessage(name string, fwk framework.Framework) string {
	if fwk.WorkloadAware() {
		return fmt.Sprintf("profile %s started scheduling pod groups as a unit while the pod was held at Permit", name)
	}
	return fmt.Sprintf("profile %s stopped scheduling pod groups as a unit while the pod was held at Permit", name)
}

// Start runs the scheduling loop until ctx ends: it starts the informers
// unless the Informers runnable did, waits for them and their handlers to
// have seen every existing object (nodes, pods, storage objects), then
// schedules one pod after another. On return the bindings in flight have
// finished; pods waiting at Permit were released back to the queue.
func (s *Scheduler) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("scheduler")
	ctx = klog.NewContext(ctx, logger)
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("the scheduler was already started")
	}
	s.started = true
	s.mu.Unlock()

	if err := s.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return fmt.Errorf("starting the event broadcaster: %w", err)
	}
	defer s.broadcaster.Shutdown()
	s.startInformers(ctx)
	if !s.waitForInformers(ctx) {
		// Stopped before it started: not an error of the scheduler's.
		return nil
	}
	s.unserved.start()

	var background sync.WaitGroup
	background.Add(5)
	go func() { defer background.Done(); s.warnUnserved(ctx, s.unservedWarningDelay) }()
	go func() { defer background.Done(); s.cache.Run(ctx) }()
	go func() { defer background.Done(); s.queue.Run(ctx) }()
	go func() { defer background.Done(); s.status.run(ctx) }()
	go func() { defer background.Done(); s.podGroupStatus.run(ctx) }()
	logger.Info("Starting the scheduling loop", "profiles", s.profiles.Names())
	for s.scheduleOne(ctx) {
	}
	s.bindings.Wait()
	background.Wait()
	logger.Info("Scheduling loop stopped")
	return nil
}

// requeueExpiredPod puts back a pod whose assumed binding expired, if the
// informer still shows it unbound.
func (s *Scheduler) requeueExpiredPod(logger klog.Logger, pod *v1.Pod) {
	current, err := s.podLister.Pods(pod.Namespace).Get(pod.Name)
	if err != nil || current.UID != pod.UID || current.Spec.NodeName != "" {
		return
	}
	// Unbound, it is an unscheduled member of its pod group again.
	s.cache.AddPodGroupMember(current)
	s.queue.Add(logger, current)
}
