package localcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestKubeletDeclaredFeatures pins what a 1.37.2 kubelet with default
// feature gates reports, sorted as the API server requires: the four of
// 1.36.3, none of the features 1.37 adds being on by default.
func TestKubeletDeclaredFeatures(t *testing.T) {
	want := []string{
		"ExtendWebSocketsToKubelet",
		"InPlacePodLevelResourcesVerticalScaling",
		"InPlacePodVerticalScalingInitContainers",
		"RestartAllContainersOnContainerExits",
	}
	if diff := cmp.Diff(want, KubeletDeclaredFeatures()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, Node("n", Zones[0], Standard).Status.DeclaredFeatures); diff != "" {
		t.Errorf("simulated node (-want +got):\n%s", diff)
	}
}
