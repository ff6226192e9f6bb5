// Package metrics holds the Prometheus metrics of one scheduling loop: its
// queue, its framework instances and the plugins that report their own
// (DefaultPreemption). Names, help texts, buckets and labels are
// kube-scheduler's, so dashboards written for it work unchanged.
//
// Upstream keeps these series in package variables because its profiles are
// fixed for the life of the process. Here profiles come and go and several
// schedulers may share a process (tests, tools), so each scheduler owns a
// Metrics registered on the Registerer it was given, and deletes a
// profile's series when the profile is retired (DeleteProfile).
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Subsystem prefixes every metric name, as upstream's SchedulerSubsystem.
const Subsystem = "scheduler"

// ProfileLabel is the label that names the profile (its schedulerName).
const ProfileLabel = "profile"

// Extension point label values, as upstream.
const (
	PreEnqueue                  = "PreEnqueue"
	QueueSort                   = "QueueSort"
	PreFilter                   = "PreFilter"
	Filter                      = "Filter"
	PreFilterExtensionAddPod    = "PreFilterExtensionAddPod"
	PreFilterExtensionRemovePod = "PreFilterExtensionRemovePod"
	PostFilter                  = "PostFilter"
	PreScore                    = "PreScore"
	Score                       = "Score"
	ScoreExtensionNormalize     = "ScoreExtensionNormalize"
	PreBind                     = "PreBind"
	PreBindPreFlight            = "PreBindPreFlight"
	Bind                        = "Bind"
	PostBind                    = "PostBind"
	Reserve                     = "Reserve"
	Unreserve                   = "Unreserve"
	Permit                      = "Permit"
	// Sign is the extension point of SignPlugins (pod signatures).
	Sign = "Sign"
	// The pod-group (workload) points.
	PlacementGenerate                = "PlacementGenerate"
	PlacementFeasible                = "PlacementFeasible"
	PlacementScore                   = "PlacementScore"
	PlacementScoreExtensionNormalize = "PlacementScoreExtensionNormalize"
	PodGroupPostFilter               = "PodGroupPostFilter"
)

// Results of scheduler_batch_attempts_total, as upstream.
const (
	BatchAttemptNoHint      = "no_hint"
	BatchAttemptHintUsed    = "hint_used"
	BatchAttemptHintNotUsed = "hint_not_used"
)

// Reasons of scheduler_batch_cache_flushed_total, as upstream.
const (
	BatchFlushPodFailed       = "pod_failed"
	BatchFlushPodSkipped      = "pod_skipped"
	BatchFlushPodNominated    = "pod_nominated"
	BatchFlushNodeMissing     = "node_missing"
	BatchFlushEmptyList       = "empty_list"
	BatchFlushExpired         = "expired"
	BatchFlushPodIncompatible = "pod_incompatible"
	BatchFlushPodNotBatchable = "pod_not_batchable"
	BatchFlushFilterError     = "filter_error"
	BatchFlushPreScoreError   = "prescore_error"
	BatchFlushRescoreError    = "rescore_error"
	BatchFlushNormalizeError  = "normalize_error"
)

// Status label values of the DRA binding-conditions metrics, as upstream:
// how DynamicResources' wait in PreBind for the binding conditions of
// allocated devices ended.
const (
	BindingConditionsStatusSuccess = "success"
	BindingConditionsStatusFailed  = "failure"
	BindingConditionsStatusTimeout = "timeout"
	BindingConditionsStatusError   = "error"
)

// Metrics is every metric of one scheduling loop. The fields are safe for
// concurrent use; a nil *Metrics is not.
type Metrics struct {
	// ScheduleAttempts is scheduler_schedule_attempts_total{result, profile}.
	ScheduleAttempts *prometheus.CounterVec
	// SchedulingAttemptDuration is scheduler_scheduling_attempt_duration_seconds{result, profile}.
	SchedulingAttemptDuration *prometheus.HistogramVec
	// PodSchedulingSLIDuration is scheduler_pod_scheduling_sli_duration_seconds{attempts, profile}.
	PodSchedulingSLIDuration *prometheus.HistogramVec
	// PodSchedulingAttempts is scheduler_pod_scheduling_attempts.
	PodSchedulingAttempts prometheus.Histogram
	// PodGroupScheduleAttempts is scheduler_podgroup_schedule_attempts_total{result, profile}.
	PodGroupScheduleAttempts *prometheus.CounterVec
	// PodGroupSchedulingAttemptDuration is scheduler_podgroup_scheduling_attempt_duration_seconds{result, profile}.
	PodGroupSchedulingAttemptDuration *prometheus.HistogramVec
	// PodGroupSchedulingAlgorithmLatency is scheduler_podgroup_scheduling_algorithm_duration_seconds,
	// upstream's unlabelled histogram. Upstream registers it only with the
	// GenericWorkload gate; here it is a vector without labels, so that its
	// series appears with the first pod-group cycle and an operator that
	// never schedules a pod group exports what it did before.
	PodGroupSchedulingAlgorithmLatency *prometheus.HistogramVec
	// GeneratedPlacementsTotal is scheduler_generated_placements_total{profile}.
	GeneratedPlacementsTotal *prometheus.CounterVec
	// PlacementEvaluations is scheduler_placement_evaluations_total{result, profile}.
	PlacementEvaluations *prometheus.CounterVec
	// PlacementEvaluationDuration is scheduler_placement_evaluation_duration_seconds{result, profile}.
	PlacementEvaluationDuration *prometheus.HistogramVec
	// PendingPods is scheduler_pending_pods{queue}.
	PendingPods *prometheus.GaugeVec
	// UnservedPendingPods counts the pending pods whose schedulerName no
	// profile serves; it is ours, upstream has no such gauge.
	UnservedPendingPods *prometheus.GaugeVec

	// FrameworkExtensionPointDuration is
	// scheduler_framework_extension_point_duration_seconds{extension_point, status, profile}.
	FrameworkExtensionPointDuration *prometheus.HistogramVec
	// PluginExecutionDuration is
	// scheduler_plugin_execution_duration_seconds{plugin, extension_point, status}.
	PluginExecutionDuration *prometheus.HistogramVec
	// PermitWaitDuration is scheduler_permit_wait_duration_seconds{result}.
	PermitWaitDuration *prometheus.HistogramVec

	// BatchAttempts is scheduler_batch_attempts_total{profile, result}.
	BatchAttempts *prometheus.CounterVec
	// BatchCacheFlushed is scheduler_batch_cache_flushed_total{profile, reason}.
	BatchCacheFlushed *prometheus.CounterVec
	// BatchRescoreAttempts is scheduler_batch_rescore_attempts_total{profile}.
	BatchRescoreAttempts *prometheus.CounterVec
	// BatchRescoreDuration is scheduler_batch_rescore_duration_seconds{profile}.
	BatchRescoreDuration *prometheus.HistogramVec
	// GetNodeHintDuration is scheduler_get_node_hint_duration_seconds{hinted, profile}.
	GetNodeHintDuration *prometheus.HistogramVec
	// StoreScheduleResultsDuration is scheduler_store_schedule_results_duration_seconds{profile}.
	StoreScheduleResultsDuration *prometheus.HistogramVec

	// PreemptionAttempts is scheduler_preemption_attempts_total.
	PreemptionAttempts prometheus.Counter
	// PreemptionVictims is scheduler_preemption_victims.
	PreemptionVictims prometheus.Histogram
	// WorkloadPreemptionAttempts is scheduler_workload_preemption_attempts_total{result},
	// counted once per run of DefaultPreemption's PodGroupPostFilter.
	WorkloadPreemptionAttempts *prometheus.CounterVec
	// WorkloadPreemptionVictims is scheduler_workload_preemption_victims,
	// the victims chosen per pod-group preemption. Upstream's histogram
	// has no labels and is registered only with the GenericWorkload gate;
	// here it is a vector without labels, as
	// PodGroupSchedulingAlgorithmLatency, so that it is exported from the
	// first pod-group preemption on.
	WorkloadPreemptionVictims *prometheus.HistogramVec
	// PreemptionGoroutinesDuration is scheduler_preemption_goroutines_duration_seconds{result},
	// deprecated upstream since 1.37.0 in favour of PreemptionExecutionDuration.
	PreemptionGoroutinesDuration *prometheus.HistogramVec
	// PreemptionGoroutinesExecutionTotal is scheduler_preemption_goroutines_execution_total{result}.
	PreemptionGoroutinesExecutionTotal *prometheus.CounterVec
	// PreemptionEvaluationDuration is
	// scheduler_preemption_evaluation_duration_seconds{preemptor, result}.
	PreemptionEvaluationDuration *prometheus.HistogramVec
	// PreemptionExecutionDuration is
	// scheduler_preemption_execution_duration_seconds{preemptor, result}.
	PreemptionExecutionDuration *prometheus.HistogramVec
	// PreemptionPDBViolations is scheduler_preemption_pdb_violations_total{preemptor}.
	PreemptionPDBViolations *prometheus.CounterVec

	// ResourceClaimCreates is
	// dynamic_resource_allocation_resourceclaim_creates_total{status,
	// admin_access, owner_api_group, owner_api_kind}, shared upstream with
	// kube-controller-manager: here, the special claims DynamicResources
	// creates for extended resources backed by DRA.
	ResourceClaimCreates *prometheus.CounterVec
	// DRABindingConditionsAllocations is
	// scheduler_dra_bindingconditions_allocations_total{profile, driver, status}.
	DRABindingConditionsAllocations *prometheus.CounterVec
	// DRABindingConditionsWaitDuration is
	// scheduler_dra_bindingconditions_wait_duration_seconds{profile, driver, status}.
	DRABindingConditionsWaitDuration *prometheus.HistogramVec

	// ShadowEvaluations counts the placements shadow profiles evaluated,
	// by the SchedulingProfile of the shadow and the outcome (ShadowSameNode,
	// ShadowOtherNode, ShadowNoNode, ShadowError); ours, upstream has no
	// shadows.
	ShadowEvaluations *prometheus.CounterVec
	// ShadowSkippedPods counts the placements a shadow did not evaluate,
	// by the reason (ShadowSampledOut, ShadowQueueFull).
	ShadowSkippedPods *prometheus.CounterVec
}

// Outcome label values of ShadowEvaluations.
const (
	ShadowSameNode  = "same_node"
	ShadowOtherNode = "other_node"
	ShadowNoNode    = "no_node"
	ShadowError     = "error"
)

// Reason label values of ShadowSkippedPods.
const (
	ShadowSampledOut = "sampled_out"
	ShadowQueueFull  = "queue_full"
)

// New returns the metrics of one scheduling loop, registered on reg. Each
// scheduler needs its own instance; registering a second one on the same
// registry fails, as the two would write the same series.
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("a metrics registerer is required")
	}
	m := NewUnregistered()
	var errs []error
	for _, c := range m.collectors() {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// NewUnregistered returns metrics that are observed but exported nowhere,
// for components built on their own (tests, tools) rather than by a
// scheduler.
func NewUnregistered() *Metrics {
	return &Metrics{
		ScheduleAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: Subsystem,
			Name:      "schedule_attempts_total",
			Help:      "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
		}, []string{"result", ProfileLabel}),
		SchedulingAttemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "scheduling_attempt_duration_seconds",
			Help:      "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
			Buckets:   prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"result", ProfileLabel}),
		PodSchedulingSLIDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "pod_scheduling_sli_duration_seconds",
			Help:      "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
			Buckets:   prometheus.ExponentialBuckets(0.01, 2, 20),
		}, []string{"attempts", ProfileLabel}),
		PodSchedulingAttempts: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "pod_scheduling_attempts",
			Help:      "Number of attempts to successfully schedule a pod.",
			Buckets:   prometheus.ExponentialBuckets(1, 2, 5),
		}),
		PodGroupScheduleAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: Subsystem,
			Name:      "podgroup_schedule_attempts_total",
			Help:      "Number of attempts to schedule pod group, by the result. 'unschedulable' means a pod group could not be scheduled, while 'error' means an internal scheduler problem.",
		}, []string{"result", ProfileLabel}),
		PodGroupSchedulingAttemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "podgroup_scheduling_attempt_duration_seconds",
			Help:      "Pod group scheduling attempt latency in seconds",
			Buckets:   prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"result", ProfileLabel}),
		PodGroupSchedulingAlgorithmLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "podgroup_scheduling_algorithm_duration_seconds",
			Help:      "Pod group scheduling algorithm latency in seconds",
			Buckets:   prometheus.ExponentialBuckets(0.001, 2, 15),
		}, nil),
		GeneratedPlacementsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: Subsystem,
			Name:      "generated_placements_total",
			Help:      "Number of candidate placements generated when scheduling pod groups.",
		}, []string{ProfileLabel}),
		PlacementEvaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: Subsystem,
			Name:      "placement_evaluations_total",
			Help:      "Number of candidate placements evaluated when scheduling pod groups, by result. 'feasible' means the pod group fit into the placement, while 'infeasible' means it did not.",
		}, []string{"result", ProfileLabel}),
		PlacementEvaluationDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "placement_evaluation_duration_seconds",
			Help:      "Latency in seconds of evaluating a single candidate placement when scheduling pod groups, by result. 'feasible' means the pod group fit into the placement, while 'infeasible' means it did not.",
			Buckets:   prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"result", ProfileLabel}),
		PendingPods: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: Subsystem,
			Name:      "pending_pods",
			Help: "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; " +
				"'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods " +
				"that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods " +
				"that the scheduler never attempted to schedule because they are gated.",
		}, []string{"queue"}),
		UnservedPendingPods: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: Subsystem,
			Name:      "unserved_pending_pods",
			Help: "Number of pending pods whose spec.schedulerName no profile serves, by that schedulerName. " +
				"Names reserved for other schedulers are not counted.",
		}, []string{"scheduler_name"}),
		FrameworkExtensionPointDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "framework_extension_point_duration_seconds",
			Help:      "Latency for running all plugins of a specific extension point.",
			// 0.1ms up to [~200ms, Inf).
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 12),
		}, []string{"extension_point", "status", ProfileLabel}),
		PluginExecutionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "plugin_execution_duration_seconds",
			Help:      "Duration for running a plugin at a specific extension point.",
			// 0.01ms up to [~22ms, Inf); factor 1.5 because plugin latency is small and sensitive.
			Buckets: prometheus.ExponentialBuckets(0.00001, 1.5, 20),
		}, []string{"plugin", "extension_point", "status"}),
		PermitWaitDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "permit_wait_duration_seconds",
			Help:      "Duration of waiting on permit.",
			Buckets:   prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"result"}),
		BatchAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: Subsystem,
			Name:      "batch_attempts_total",
			Help:      "Counts of results when we attempt to use batching.",
		}, []string{ProfileLabel, "result"}),
		BatchCacheFlushed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: Subsystem,
			Name:      "batch_cache_flushed_total",
			Help:      "Counts of cache flushes by reason.",
		}, []string{ProfileLabel, "reason"}),
		BatchRescoreAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: Subsystem,
			Name:      "batch_rescore_attempts_total",
			Help:      "Counts of rescore attempts during opportunistic batching.",
		}, []string{ProfileLabel}),
		BatchRescoreDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "batch_rescore_duration_seconds",
			Help:      "Latency for rescoring a node during opportunistic batching.",
			// 0.01ms up to [~20ms, Inf).
			Buckets: prometheus.ExponentialBuckets(0.00001, 2, 12),
		}, []string{ProfileLabel}),
		GetNodeHintDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "get_node_hint_duration_seconds",
			Help:      "Latency for getting a node hint.",
			Buckets:   prometheus.ExponentialBuckets(0.00001, 2, 12),
		}, []string{"hinted", ProfileLabel}),
		StoreScheduleResultsDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "store_schedule_results_duration_seconds",
			Help:      "Latency for storing scheduling results.",
			Buckets:   prometheus.ExponentialBuckets(0.00001, 2, 12),
		}, []string{ProfileLabel}),
		PreemptionAttempts: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: Subsystem,
			Name:      "preemption_attempts_total",
			Help:      "Total preemption attempts in the cluster till now",
		}),
		PreemptionVictims: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "preemption_victims",
			Help:      "Number of selected preemption victims for preemption initiated by a single pod",
			// More than 64 victims is rare enough for one [64, +Inf) bucket.
			Buckets: prometheus.ExponentialBuckets(1, 2, 7),
		}),
		WorkloadPreemptionAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: Subsystem,
			Name:      "workload_preemption_attempts_total",
			Help:      "Total preemption attempts initiated by workload (including pod groups) in the cluster till now.",
		}, []string{"result"}),
		WorkloadPreemptionVictims: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "workload_preemption_victims",
			Help:      "Number of pod preemption victims caused by workload preemption.",
			// Start with 1 with the last bucket being [1024, Inf).
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}, nil),
		PreemptionGoroutinesDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "preemption_goroutines_duration_seconds",
			Help:      "Duration in seconds for running goroutines for the preemption.",
			Buckets:   prometheus.ExponentialBuckets(0.01, 2, 20),
		}, []string{"result"}),
		PreemptionGoroutinesExecutionTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: Subsystem,
			Name:      "preemption_goroutines_execution_total",
			Help:      "Number of preemption goroutines executed.",
		}, []string{"result"}),
		PreemptionEvaluationDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "preemption_evaluation_duration_seconds",
			Help:      "Duration in seconds for identifying the target preemption victims.",
			Buckets:   prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"preemptor", "result"}),
		PreemptionExecutionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "preemption_execution_duration_seconds",
			Help: "Duration in seconds for preempting the target preemption victims. With async preemption enabled, " +
				"preemption execution does not block the scheduling of other pods.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"preemptor", "result"}),
		PreemptionPDBViolations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: Subsystem,
			Name:      "preemption_pdb_violations_total",
			Help:      "Total number of pod disruption budget violations caused by preemption.",
		}, []string{"preemptor"}),
		ResourceClaimCreates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "dynamic_resource_allocation",
			Name:      "resourceclaim_creates_total",
			Help:      "Number of ResourceClaims creation requests, categorized by creation status, admin access, and owning API group and kind (either Pod or scheduling.k8s.io/PodGroup)",
		}, []string{"status", "admin_access", "owner_api_group", "owner_api_kind"}),
		DRABindingConditionsAllocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: Subsystem,
			Name:      "dra_bindingconditions_allocations_total",
			Help:      "Number of allocations using devices with BindingConditions, counted per driver per scheduling attempt",
		}, []string{ProfileLabel, "driver", "status"}),
		DRABindingConditionsWaitDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: Subsystem,
			Name:      "dra_bindingconditions_wait_duration_seconds",
			Help:      "Time in seconds spent waiting for BindingConditions to be satisfied during PreBind.",
			// 0.1s up to [~14min, Inf): the wait is bounded by the binding timeout, 10 minutes by default.
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 14),
		}, []string{ProfileLabel, "driver", "status"}),
		ShadowEvaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: Subsystem,
			Name:      "shadow_evaluations_total",
			Help: "Number of placements a shadow profile evaluated, by the outcome: 'same_node' when the serving scheduler's node was " +
				"among the shadow's best nodes, 'other_node' when it was not, 'no_node' when the shadow found the pod unschedulable, " +
				"'error' when the evaluation failed.",
		}, []string{ProfileLabel, "result"}),
		ShadowSkippedPods: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: Subsystem,
			Name:      "shadow_skipped_pods_total",
			Help: "Number of placements a shadow profile did not evaluate, by the reason: 'sampled_out' beyond its sampling rate, " +
				"'queue_full' when it fell behind.",
		}, []string{ProfileLabel, "reason"}),
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.ScheduleAttempts, m.SchedulingAttemptDuration, m.PodSchedulingSLIDuration, m.PodSchedulingAttempts,
		m.PodGroupScheduleAttempts, m.PodGroupSchedulingAttemptDuration, m.PodGroupSchedulingAlgorithmLatency,
		m.GeneratedPlacementsTotal, m.PlacementEvaluations, m.PlacementEvaluationDuration,
		m.PendingPods, m.UnservedPendingPods,
		m.FrameworkExtensionPointDuration, m.PluginExecutionDuration, m.PermitWaitDuration,
		m.BatchAttempts, m.BatchCacheFlushed, m.BatchRescoreAttempts, m.BatchRescoreDuration,
		m.GetNodeHintDuration, m.StoreScheduleResultsDuration,
		m.PreemptionAttempts, m.PreemptionVictims, m.WorkloadPreemptionAttempts, m.WorkloadPreemptionVictims, m.PreemptionGoroutinesDuration, m.PreemptionGoroutinesExecutionTotal,
		m.PreemptionEvaluationDuration, m.PreemptionExecutionDuration, m.PreemptionPDBViolations,
		m.ResourceClaimCreates,
		m.DRABindingConditionsAllocations, m.DRABindingConditionsWaitDuration,
		m.ShadowEvaluations, m.ShadowSkippedPods,
	}
}

// DeleteProfile deletes every series labelled with profile. Profiles are
// dynamic here, unlike upstream: without this, a removed or renamed
// profile's series would be exported, unchanging, until the process ends.
// An observer resolved before the call keeps working but no longer
// reaches the registry.
func (m *Metrics) DeleteProfile(profile string) {
	labels := prometheus.Labels{ProfileLabel: profile}
	m.ScheduleAttempts.DeletePartialMatch(labels)
	m.SchedulingAttemptDuration.DeletePartialMatch(labels)
	m.PodSchedulingSLIDuration.DeletePartialMatch(labels)
	m.PodGroupScheduleAttempts.DeletePartialMatch(labels)
	m.PodGroupSchedulingAttemptDuration.DeletePartialMatch(labels)
	m.GeneratedPlacementsTotal.DeletePartialMatch(labels)
	m.PlacementEvaluations.DeletePartialMatch(labels)
	m.PlacementEvaluationDuration.DeletePartialMatch(labels)
	m.FrameworkExtensionPointDuration.DeletePartialMatch(labels)
	m.BatchAttempts.DeletePartialMatch(labels)
	m.BatchCacheFlushed.DeletePartialMatch(labels)
	m.BatchRescoreAttempts.DeletePartialMatch(labels)
	m.BatchRescoreDuration.DeletePartialMatch(labels)
	m.GetNodeHintDuration.DeletePartialMatch(labels)
	m.StoreScheduleResultsDuration.DeletePartialMatch(labels)
	m.DRABindingConditionsAllocations.DeletePartialMatch(labels)
	m.DRABindingConditionsWaitDuration.DeletePartialMatch(labels)
}

// DeleteShadow deletes the series of the shadow profile named profile.
// They are apart from DeleteProfile's: a shadow is labelled with its
// SchedulingProfile's name, which may equal a schedulerName served by
// another profile.
func (m *Metrics) DeleteShadow(profile string) {
	labels := prometheus.Labels{ProfileLabel: profile}
	m.ShadowEvaluations.DeletePartialMatch(labels)
	m.ShadowSkippedPods.DeletePartialMatch(labels)
}
