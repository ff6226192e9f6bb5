package resourcescore

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestMatchCachePrune: the cache keeps the pairs of listed slices and
// current classes only, so a replaced DeviceClass does not leave its
// answers behind.
func TestMatchCachePrune(t *testing.T) {
	ctx := context.Background()
	slice := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{
		Driver:  "gpu.example.com",
		Devices: []resourceapi.Device{{Name: "gpu-0"}, {Name: "gpu-1"}},
	}}
	class := &resourceapi.DeviceClass{Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{
		{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}},
	}}}
	c := NewMatchCache()
	matches, err := c.deviceMatches(ctx, slice, class)
	if err != nil {
		t.Fatal(err)
	}
	if len(matches) != 2 || !matches[0] || !matches[1] {
		t.Fatalf("matches = %v, want both devices", matches)
	}
	c.prune([]*resourceapi.ResourceSlice{slice}, map[*resourceapi.DeviceClass]bool{class: true})
	if len(c.matches) != 1 {
		t.Errorf("after pruning with the same slice and class: %d pairs, want 1", len(c.matches))
	}

	updated := class.DeepCopy()
	c.prune([]*resourceapi.ResourceSlice{slice}, map[*resourceapi.DeviceClass]bool{updated: true})
	if len(c.matches) != 0 {
		t.Errorf("after the class was replaced: %d pairs, want 0", len(c.matches))
	}

	if _, err := c.deviceMatches(ctx, slice, updated); err != nil {
		t.Fatal(err)
	}
	c.prune(nil, map[*resourceapi.DeviceClass]bool{updated: true})
	if len(c.matches) != 0 {
		t.Errorf("after the slice went: %d pairs, want 0", len(c.matches))
	}
}
