package controllers

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// TestWorkloadAPI checks what the discovery cache says as the API server
// serves the workload API, part of it or none, and that an error keeps
// the last answer.
func TestWorkloadAPI(t *testing.T) {
	disco := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{}}
	api := NewWorkloadAPI(disco)
	serve := func(resources ...string) {
		list := &metav1.APIResourceList{GroupVersion: "scheduling.k8s.io/v1beta1"}
		for _, r := range resources {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: r})
		}
		disco.Resources = []*metav1.APIResourceList{list}
	}
	failing := false
	disco.AddReactor("get", "resource", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		if failing {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})

	missing, err := api.Missing(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"workloads", "podgroups"}, missing); diff != "" {
		t.Errorf("not served (-want +got):\n%s", diff)
	}

	serve("podgroups", "podgroups/status")
	// The answer is cached until refreshed.
	if missing, _ := api.Missing(t.Context()); len(missing) != 2 {
		t.Errorf("Missing() before a refresh = %v, want the cached answer", missing)
	}
	for _, step := range []struct {
		name        string
		resources   []string
		fail        bool
		wantChanged bool
		wantErr     bool
		want        []string
	}{
		{name: "podgroups only", resources: []string{"podgroups", "podgroups/status"}, wantChanged: true, want: []string{"workloads"}},
		{name: "both", resources: []string{"workloads", "podgroups", "podgroups/status"}, wantChanged: true},
		{name: "both again", resources: []string{"workloads", "podgroups"}},
		// The last answer stands.
		{name: "the API server does not answer", fail: true, wantErr: true},
		{name: "gone", resources: nil, wantChanged: true, want: []string{"workloads", "podgroups"}},
	} {
		t.Run(step.name, func(t *testing.T) {
			failing = step.fail
			if step.resources != nil {
				serve(step.resources...)
			} else {
				disco.Resources = nil
			}
			changed, err := api.refresh(t.Context())
			if (err != nil) != step.wantErr || changed != step.wantChanged {
				t.Fatalf("refresh() = %t, %v; want changed %t, error %t", changed, err, step.wantChanged, step.wantErr)
			}
			missing, err := api.Missing(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(step.want, missing); diff != "" {
				t.Errorf("not served (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWarmPodGroups: the runnable starts the PodGroup informer once the
// API server serves the workload API, not before, retries a start that
// failed, and runs on standbys.
func TestWarmPodGroups(t *testing.T) {
	disco := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{}}
	var mu sync.Mutex
	served, starts, failStart := false, 0, true
	disco.AddReactor("get", "resource", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if served {
			disco.Resources = []*metav1.APIResourceList{{GroupVersion: "scheduling.k8s.io/v1beta1",
				APIResources: []metav1.APIResource{{Name: "workloads"}, {Name: "podgroups"}}}}
		}
		return false, nil, nil
	})
	start := func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		starts++
		if failStart {
			failStart = false
			return errors.New("the PodGroup informer did not sync")
		}
		return nil
	}
	r := WarmPodGroups(disco, 10*time.Millisecond, start)
	if r.(manager.LeaderElectionRunnable).NeedLeaderElection() {
		t.Error("the runnable needs the Lease: standbys would start cold")
	}
	done := make(chan error, 1)
	go func() { done <- r.Start(t.Context()) }()

	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	if starts != 0 {
		t.Errorf("started the informer %d times before the API server served the API", starts)
	}
	served = true
	mu.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the runnable did not finish once the API was served")
	}
	if starts != 2 {
		t.Errorf("started the informer %d times, want 2 (a failed start, then one that succeeded)", starts)
	}
}
