package main

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
)

// Workload is one benchmark case, in the manner of scheduler_perf's
// workloads: nodes, pods already placed, then the measured pods.
type Workload struct {
	Name string
	// Nodes, InitPods and Pods are the counts of nodes, of pods already
	// bound before the measurement, and of pods measured.
	Nodes, InitPods, Pods int
	// Profile is the spec of the measured SchedulingProfile, in YAML.
	Profile string
	// Pod makes the i-th measured pod; nil means the default pod.
	Pod func(p *corev1.Pod)
	// Approve runs an automated approver that approves every WaitingPod.
	Approve bool
	// Gang, when set, puts the measured pods into PodGroups of that many
	// members each (minMember too), for a Coscheduling profile.
	Gang int
	// PodGroups, when set, puts the measured pods into upstream's
	// scheduling.k8s.io/v1beta1 PodGroups (spec.schedulingGroup), gangs
	// whose sizes cycle through this list, each with minCount its size;
	// both schedulers run with the workload gates (workloadGates).
	PodGroups []int
	// Extender gives the measured profile (and kube-scheduler) an HTTP
	// extender served by the harness on loopback, for filter and
	// prioritize.
	Extender bool
	// Memory marks a memory workload: no ceiling; after its few pods are
	// scheduled each scheduler stays idle for a while (steadyState) before
	// its memory is read.
	Memory bool
	// Shadow, when set, is the spec of a shadow profile of the measured
	// one (spec.shadowOf), running before the measured phase starts: the
	// cost of a shadow beside the serving profile.
	Shadow string
	// NoBatching turns the OpportunisticBatching feature gate off in both
	// schedulers (--feature-gates), for the figures before batching.
	NoBatching bool
	// DRA gives every other node the simulated GPUs of the local run,
	// published by the simulated DRA driver, runs kube-controller-
	// manager's resource claim controller, and gives each namespace the
	// ResourceClaimTemplate gpuTemplate, which the Pod function names.
	DRA bool
}

// Node and pod shapes of scheduler_perf's default templates.
var (
	perfNode = localcluster.NodeShape{InstanceType: "perf", CPU: "4", Memory: "32Gi", Pods: 110}
	podCPU   = resource.MustParse("100m")
	podMem   = resource.MustParse("500Mi")
)

func basicPod(namespace, name, schedulerName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": "perf"}},
		Spec: corev1.PodSpec{
			SchedulerName: schedulerName,
			Containers: []corev1.Container{{
				Name: "pause", Image: "pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: podCPU, corev1.ResourceMemory: podMem,
				}},
			}},
		},
	}
}

// zoneAffinity requires the zones zone-a or zone-b: two nodes in three fit.
func zoneAffinity(p *corev1.Pod) {
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: localcluster.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a", "zone-b"},
			}},
		}}},
	}}
}

// gpuTemplate is the ResourceClaimTemplate of DRA workloads: one simulated
// GPU.
const gpuTemplate = "gpu"

// gpuClaim gives the pod a claim made from gpuTemplate, used by its
// container.
func gpuClaim(p *corev1.Pod) {
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(gpuTemplate)}}
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
}

const (
	defaultProfile = "{}"
	mostAllocated  = `pluginConfig:
- name: NodeResourcesFit
  args:
    scoringStrategy:
      type: MostAllocated`
	manualApproval = `plugins:
  multiPoint:
    enabled:
    - name: ManualApproval`
	coscheduling = `plugins:
  multiPoint:
    enabled:
    - name: Coscheduling
  queueSort:
    enabled:
    - name: Coscheduling
    disabled:
    - name: "*"`
	// workloadAware is upstream's default profile as kube-scheduler 1.37.2
	// expands it with GenericWorkload and TopologyAwareWorkloadScheduling
	// on: the profile that opts in here names the plugins the gates add.
	workloadAware = `plugins:
  multiPoint:
    enabled:
    - name: GangScheduling
    - name: TopologyPlacementGenerator
    - name: PodGroupPodsCount
      weight: 1`
	// noPodTopologySpread is the default profile without
	// PodTopologySpread: its system default constraints leave every pod
	// unsigned, so the default profile never batches, upstream's included.
	noPodTopologySpread = `plugins:
  multiPoint:
    disabled:
    - name: PodTopologySpread`
)

// allWorkloads are the workloads the harness knows; defaultWorkloads run
// when none are named.
var allWorkloads = []Workload{
	{Name: "SchedulingBasic/500Nodes", Nodes: 500, InitPods: 500, Pods: 3000, Profile: defaultProfile},
	{Name: "SchedulingBasic/5000Nodes", Nodes: 5000, InitPods: 1000, Pods: 3000, Profile: defaultProfile},
	{Name: "SchedulingBasic/5000Nodes_10000Pods", Nodes: 5000, InitPods: 1000, Pods: 10000, Profile: defaultProfile},
	{Name: "NodeAffinity/500Nodes", Nodes: 500, InitPods: 500, Pods: 3000, Profile: defaultProfile, Pod: zoneAffinity},
	{Name: "MostAllocated/500Nodes", Nodes: 500, InitPods: 500, Pods: 3000, Profile: mostAllocated},
	// SchedulingBasic/500Nodes with a shadow that packs, at its default
	// sampling rate: compare the two for what a shadow costs the serving
	// profile.
	{Name: "Shadow/500Nodes", Nodes: 500, InitPods: 500, Pods: 3000, Profile: defaultProfile, Shadow: mostAllocated},
	{Name: "ManualApproval/500Nodes", Nodes: 500, InitPods: 500, Pods: 500, Profile: manualApproval, Approve: true},
	// Gangs of 8 (scheduler-plugins' Coscheduling with PodGroups): each
	// member waits at Permit until its gang is complete.
	{Name: "Gangs/500Nodes", Nodes: 500, InitPods: 500, Pods: 3000, Profile: coscheduling, Gang: 8},
	// Upstream's gangs (scheduling.k8s.io/v1beta1 PodGroups of 2, 4, 8 and
	// 16 pods, 400 groups), each scheduled in one pod-group cycle by a
	// workload-aware profile, beside kube-scheduler with the same gates.
	{Name: "PodGroups/500Nodes", Nodes: 500, InitPods: 500, Pods: 3000, Profile: workloadAware, PodGroups: []int{2, 4, 8, 16}},
	// A run of identical pods under a profile in which they can be signed,
	// with opportunistic batching (on by default) and without it.
	{Name: "IdenticalPods/5000Nodes", Nodes: 5000, InitPods: 1000, Pods: 3000, Profile: noPodTopologySpread},
	{Name: "IdenticalPods/5000Nodes_NoBatching", Nodes: 5000, InitPods: 1000, Pods: 3000, Profile: noPodTopologySpread, NoBatching: true},
	{Name: "IdenticalPods/15000Nodes", Nodes: 15000, InitPods: 3000, Pods: 3000, Profile: noPodTopologySpread},
	{Name: "IdenticalPods/15000Nodes_NoBatching", Nodes: 15000, InitPods: 3000, Pods: 3000, Profile: noPodTopologySpread, NoBatching: true},
	{Name: "Extender/500Nodes", Nodes: 500, InitPods: 500, Pods: 3000, Profile: defaultProfile, Extender: true},
	// Pods with a claim from a template for one GPU, on 250 nodes of 4
	// simulated GPUs among 500: the measured pods take 800 of the 1000.
	{Name: "DRA/500Nodes", Nodes: 500, InitPods: 500, Pods: 800, Profile: defaultProfile, Pod: gpuClaim, DRA: true},
	// A large cluster at rest: what each scheduler holds for 5000 nodes and
	// 10000 running pods, once it has scheduled a few pods.
	{Name: "Memory/5000Nodes_10000Pods", Nodes: 5000, InitPods: 10000, Pods: 100, Profile: defaultProfile, Memory: true},
}

var defaultWorkloads = []string{
	"SchedulingBasic/500Nodes",
	"Shadow/500Nodes",
	"SchedulingBasic/5000Nodes",
	"NodeAffinity/500Nodes",
	"MostAllocated/500Nodes",
	"ManualApproval/500Nodes",
	"PodGroups/500Nodes",
}

// selectWorkloads resolves a comma-separated list of names (or "default",
// "all"); scale divides node and pod counts, for quick runs.
func selectWorkloads(list string, scale int) ([]Workload, error) {
	var names []string
	switch list {
	case "", "default":
		names = defaultWorkloads
	case "all":
		for _, w := range allWorkloads {
			names = append(names, w.Name)
		}
	default:
		names = strings.Split(list, ",")
	}
	var out []Workload
	for _, name := range names {
		found := false
		for _, w := range allWorkloads {
			if w.Name == strings.TrimSpace(name) {
				if scale > 1 {
					w.Nodes = max(1, w.Nodes/scale)
					w.InitPods /= scale
					w.Pods = max(1, w.Pods/scale)
				}
				out = append(out, w)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("no workload %q; known: %s", name, workloadNames())
		}
	}
	return out, nil
}

// upstreamComparable says whether kube-scheduler can run the workload:
// it has neither ManualApproval nor Coscheduling.
func (w *Workload) upstreamComparable() bool { return !w.Approve && w.Gang == 0 }

// gangOf is the PodGroup of the i-th measured pod.
func gangOf(i, size int) string { return fmt.Sprintf("gang-%d", i/size) }

// schedulerArgs are the command-line flags the workload adds to either
// scheduler's: both take kube-scheduler's --feature-gates.
func (w *Workload) schedulerArgs() []string {
	var gates []string
	if w.NoBatching {
		gates = append(gates, "OpportunisticBatching=false")
	}
	if len(w.PodGroups) > 0 {
		gates = append(gates, localcluster.WorkloadFeatureGates)
	}
	if len(gates) == 0 {
		return nil
	}
	return []string{"--feature-gates=" + strings.Join(gates, ",")}
}

func workloadNames() string {
	var names []string
	for _, w := range allWorkloads {
		names = append(names, w.Name)
	}
	return strings.Join(names, ", ")
}
