package framework

import (
	"context"
	"encoding/json"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
)

// PodSignature identifies the pods a profile would filter and score alike:
// two pods with equal signatures get the same verdicts and scores on the
// same nodes in the same state. It is nil for a pod that cannot be signed.
// Opportunistic batching reuses one pod's results for the next pod with the
// same signature.
type PodSignature []byte

// SignFragment is one part of a signature: the pod property a plugin's
// verdicts and scores depend on (Key, one of the *SignerName constants when
// it applies) and its value, which is marshalled to JSON. Plugins that
// depend on the same property give the same key and value.
type SignFragment struct {
	Key   string
	Value any
}

// SignPlugin is implemented by PreFilter, Filter, PreScore and Score
// plugins that can tell which properties of a pod their work depends on.
// A profile signs pods only if every such plugin of it is a SignPlugin, as
// upstream.
type SignPlugin interface {
	Plugin
	// SignPod returns the fragments this plugin adds to pod's signature.
	// A status other than Success (e.g. Unschedulable for a pod whose
	// verdicts depend on other pods) makes the pod unsignable.
	SignPod(ctx context.Context, pod *v1.Pod) ([]SignFragment, *Status)
}

// Keys of signature fragments, upstream's (k8s.io/kube-scheduler/framework).
const (
	ImageNamesSignerName    = "v1.Pod.Spec.CanonicalImageNames()"
	LabelsSignerName        = "v1.Pod.Labels"
	NodeNameSignerName      = "v1.Pod.Spec.NodeName"
	NodeAffinitySignerName  = "v1.Pod.Spec.Affinity.NodeAffinity"
	NodeSelectorSignerName  = "v1.Pod.Spec.Affinity.NodeSelector"
	HostPortsSignerName     = "v1.Pod.Spec.HostPorts()"
	ResourcesSignerName     = "v1.Pod.Spec.ContainerRequestsAndOverheads()"
	SchedulerNameSignerName = "v1.Pod.Spec.SchedulerName"
	TolerationsSignerName   = "v1.Pod.Spec.Tolerations"
	VolumesSignerName       = "v1.Pod.Spec.Volumes.NonSyntheticSources()"
	FeaturesSignerName      = "v1.Pod.Spec.RequiredFeatures()"
)

// The signers below are shared by several plugins. They follow upstream's
// (k8s.io/kube-scheduler/framework/signers.go), which this package does not
// import: that package pulls in the DRA allocator.

// HostPortsSigner is the sorted set of host ports of the pod's containers
// and init containers.
func HostPortsSigner(pod *v1.Pod) []int32 {
	ports := sets.New[int32]()
	for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort != 0 {
					ports.Insert(p.HostPort)
				}
			}
		}
	}
	return sets.List(ports)
}

// TolerationsSigner is the pod's tolerations sorted by key, then value.
func TolerationsSigner(pod *v1.Pod) []v1.Toleration {
	out := slices.Clone(pod.Spec.Tolerations)
	if out == nil {
		out = []v1.Toleration{}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Key < out[j].Key || (out[i].Key == out[j].Key && out[i].Value < out[j].Value)
	})
	return out
}

// VolumesSigner is the sorted JSON of the pod's volume sources, leaving out
// ConfigMaps and Secrets: they never affect scheduling but are specific to
// each pod, so with them no two pods would sign alike.
func VolumesSigner(pod *v1.Pod) ([]string, error) {
	out := []string{}
	for _, vol := range pod.Spec.Volumes {
		if vol.ConfigMap != nil || vol.Secret != nil {
			continue
		}
		b, err := json.Marshal(vol.VolumeSource)
		if err != nil {
			return nil, err
		}
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out, nil
}

// nodeAffinitySignature is the order-independent form of a pod's node
// affinity: each term as sorted JSON, the terms sorted.
type nodeAffinitySignature struct {
	Required  []string
	Preferred []string
}

type nodeSelectorTermSignature struct {
	MatchExpressions []string
	MatchFields      []string
}

type preferredTermSignature struct {
	Weight     int32
	Preference nodeSelectorTermSignature
}

// NodeAffinitySigner is the pod's node affinity with the order of terms,
// requirements and values left out; nil without node affinity.
func NodeAffinitySigner(pod *v1.Pod) (any, error) {
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil {
		return nil, nil
	}
	na := pod.Spec.Affinity.NodeAffinity
	out := nodeAffinitySignature{Required: []string{}, Preferred: []string{}}
	for _, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		pref, err := nodeSelectorTermSigner(&t.Preference)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(preferredTermSignature{Weight: t.Weight, Preference: pref})
		if err != nil {
			return nil, err
		}
		out.Preferred = append(out.Preferred, string(b))
	}
	slices.Sort(out.Preferred)
	if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
		for i := range req.NodeSelectorTerms {
			term, err := nodeSelectorTermSigner(&req.NodeSelectorTerms[i])
			if err != nil {
				return nil, err
			}
			b, err := json.Marshal(term)
			if err != nil {
				return nil, err
			}
			out.Required = append(out.Required, string(b))
		}
		slices.Sort(out.Required)
	}
	return out, nil
}

func nodeSelectorTermSigner(t *v1.NodeSelectorTerm) (nodeSelectorTermSignature, error) {
	exprs, err := nodeSelectorRequirementsSigner(t.MatchExpressions)
	if err != nil {
		return nodeSelectorTermSignature{}, err
	}
	fields, err := nodeSelectorRequirementsSigner(t.MatchFields)
	if err != nil {
		return nodeSelectorTermSignature{}, err
	}
	return nodeSelectorTermSignature{MatchExpressions: exprs, MatchFields: fields}, nil
}

func nodeSelectorRequirementsSigner(reqs []v1.NodeSelectorRequirement) ([]string, error) {
	out := make([]string, len(reqs))
	for i := range reqs {
		r := reqs[i].DeepCopy()
		slices.Sort(r.Values)
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		out[i] = string(b)
	}
	slices.Sort(out)
	return out, nil
}

// ResourcesSigner is what the pod requests, init containers, sidecars,
// overhead and pod-level resources included, in NodeInfo's units: what
// NodeResourcesFit and NodeResourcesBalancedAllocation compare with nodes.
func ResourcesSigner(pod *v1.Pod) *Resource {
	var r Resource
	r.SetMaxResource(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	return &r
}
