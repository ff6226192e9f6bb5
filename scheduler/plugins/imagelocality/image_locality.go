// Package imagelocality provides ImageLocality, kube-scheduler's Score plugin
// that favours nodes which already hold the pod's images (containers, init
// containers and image volumes). Each image present counts its size scaled by
// the fraction of nodes that have it, so that an image everywhere does not
// pull every pod onto the same nodes; the sum is mapped to 0..100 between
// 23 MiB and 1000 MiB per image the pod names (each container, init
// container and image volume, present on the node or not, as
// kube-scheduler 1.37.2 counts them).
package imagelocality

import (
	"context"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Name is the plugin's name in profiles, as upstream.
const Name = "ImageLocality"

// Upstream's bounds of the image score range: they span the sizes of most
// compressed container images.
const (
	mb                    int64 = 1024 * 1024
	minThreshold          int64 = 23 * mb
	maxContainerThreshold int64 = 1000 * mb
)

const preScoreStateKey framework.StateKey = "PreScore" + Name

type imageLocality struct {
	handle framework.Handle
}

var (
	_ framework.PreScorePlugin = (*imageLocality)(nil)
	_ framework.ScorePlugin    = (*imageLocality)(nil)
)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ runtime.Object, h framework.Handle) (framework.Plugin, error) {
	return &imageLocality{handle: h}, nil
}

func (*imageLocality) Name() string { return Name }

// preScoreState is what Score needs, computed once per pod rather than once
// per node: the pod's normalized image names (one per container, init
// container and image volume; their number sets the top of the score
// range) and the cluster's node count.
type preScoreState struct {
	images        []string
	totalNumNodes int
}

// Clone shares the state: it does not depend on other pods.
func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore is not an upstream extension point of ImageLocality; it only
// hoists per-pod work out of Score and changes no score.
func (pl *imageLocality) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	s, err := pl.newState(pod)
	if err != nil {
		return framework.AsStatus(err)
	}
	state.Write(preScoreStateKey, s)
	return nil
}

func (pl *imageLocality) newState(pod *v1.Pod) (*preScoreState, error) {
	// The spread of an image is relative to every node of the cluster,
	// not only to the nodes that passed Filter.
	all, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, err
	}
	s := &preScoreState{
		images:        make([]string, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers)+len(pod.Spec.Volumes)),
		totalNumNodes: len(all),
	}
	for _, c := range pod.Spec.InitContainers {
		s.images = append(s.images, normalizedImageName(c.Image))
	}
	for _, c := range pod.Spec.Containers {
		s.images = append(s.images, normalizedImageName(c.Image))
	}
	for _, v := range pod.Spec.Volumes {
		if v.Image != nil {
			s.images = append(s.images, normalizedImageName(v.Image.Reference))
		}
	}
	return s, nil
}

// Score sums the scaled sizes of the pod's images present on the node and
// maps the sum to 0..100.
func (pl *imageLocality) Score(_ context.Context, state *framework.CycleState, pod *v1.Pod, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*preScoreState](state, preScoreStateKey)
	if err != nil {
		// PreScore was disabled in the profile.
		if s, err = pl.newState(pod); err != nil {
			return 0, framework.AsStatus(err)
		}
	}
	var sum int64
	for _, name := range s.images {
		if st, ok := nodeInfo.ImageStates[name]; ok {
			sum += scaledImageScore(st, s.totalNumNodes)
		}
	}
	return calculatePriority(sum, len(s.images)), nil
}

// ScoreExtensions returns nil: scores are already 0..100.
func (*imageLocality) ScoreExtensions() framework.ScoreExtensions { return nil }

// calculatePriority clamps the sum to [minThreshold, maxThreshold], where
// maxThreshold grows with the number of images the pod names (1.36 counted
// containers only, so image volumes could push a score to 100), and scales
// it to 0..100.
func calculatePriority(sumScores int64, imageCount int) int64 {
	maxThreshold := maxContainerThreshold * int64(imageCount)
	if sumScores < minThreshold {
		sumScores = minThreshold
	} else if sumScores > maxThreshold {
		sumScores = maxThreshold
	}
	return framework.MaxNodeScore * (sumScores - minThreshold) / (maxThreshold - minThreshold)
}

// scaledImageScore is the image's size times the fraction of nodes holding it.
func scaledImageScore(st *framework.ImageStateSummary, totalNumNodes int) int64 {
	spread := float64(st.NumNodes) / float64(totalNumNodes)
	return int64(float64(st.Size) * spread)
}

// normalizedImageName adds ":latest" to an image without tag or digest, as
// node status reports it. Like upstream, registry and library prefixes are
// not normalized.
func normalizedImageName(name string) string {
	if strings.LastIndex(name, ":") <= strings.LastIndex(name, "/") {
		name += ":latest"
	}
	return name
}
