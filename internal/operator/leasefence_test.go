package operator

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestLeaseFence(t *testing.T) {
	const (
		lease  = "/apis/coordination.k8s.io/v1/namespaces/ops/leases/profile-scheduler"
		leases = "/apis/coordination.k8s.io/v1/namespaces/ops/leases"
		bind   = "/api/v1/namespaces/default/pods/p/binding"
		status = "/apis/scheduling.schedprofiles.io/v1alpha1/namespaces/default/waitingpods/p/status"
		events = "/apis/events.k8s.io/v1/namespaces/ops/events"
		review = "/apis/authentication.k8s.io/v1/tokenreviews"
		sar    = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
	)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fence, err := NewLeaseFence(&rest.Config{Host: "https://127.0.0.1:6443"}, 10*time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	// The API server's answer to the leader election client's next request.
	code := http.StatusOK
	server := roundTripper(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: code, Body: http.NoBody, Request: req}, nil
	})
	elector, manager := fence.ObserveRenewals(server), fence.Guard(server)
	send := func(rt http.RoundTripper, method, path string) error {
		t.Helper()
		resp, err := rt.RoundTrip(httptest.NewRequest(method, "https://127.0.0.1:6443"+path, nil))
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	// writes tells whether the manager's clients can write, and checks that
	// reads and reviews pass whatever the fence says.
	writes := func() bool {
		t.Helper()
		for _, path := range []string{bind, lease} {
			if err := send(manager, http.MethodGet, path); err != nil {
				t.Errorf("GET %s: %v", path, err)
			}
		}
		for _, path := range []string{review, sar} {
			if err := send(manager, http.MethodPost, path); err != nil {
				t.Errorf("POST %s: %v", path, err)
			}
		}
		var refused []string
		for _, w := range []struct{ method, path string }{
			{http.MethodPost, bind}, {http.MethodPatch, status}, {http.MethodPut, status},
			{http.MethodDelete, status}, {http.MethodPost, events},
		} {
			err := send(manager, w.method, w.path)
			if err != nil {
				if !strings.Contains(err.Error(), "not sent: this replica has not renewed its leader Lease within the renew deadline (10s)") {
					t.Errorf("%s %s: unexpected error %v", w.method, w.path, err)
				}
				refused = append(refused, w.method+" "+w.path)
			}
		}
		switch len(refused) {
		case 0:
			return true
		case 5:
			return false
		}
		t.Errorf("only some writes refused: %v", refused)
		return false
	}

	if writes() {
		t.Error("a replica that never held the Lease writes")
	}
	// A standby reads the Lease and finds it held; events say nothing.
	if err := send(elector, http.MethodGet, lease); err != nil {
		t.Fatal(err)
	}
	if err := send(elector, http.MethodPost, events); err != nil {
		t.Fatal(err)
	}
	if writes() {
		t.Error("reading the Lease, or posting an event, opened the fence")
	}
	// A create of the Lease that the API server refuses (another replica
	// created it first) acquires nothing.
	code = http.StatusConflict
	if err := send(elector, http.MethodPost, leases); err != nil {
		t.Fatal(err)
	}
	if writes() {
		t.Error("a refused create of the Lease opened the fence")
	}

	code = http.StatusCreated
	if err := send(elector, http.MethodPost, leases); err != nil {
		t.Fatal(err)
	}
	if !writes() {
		t.Error("the leader cannot write right after acquiring the Lease")
	}
	clk.SetTime(clk.Now().Add(9 * time.Second))
	if !writes() {
		t.Error("the leader cannot write within the renew deadline")
	}
	code = http.StatusOK
	if err := send(elector, http.MethodPut, lease); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(9 * time.Second))
	if !writes() {
		t.Error("a renewal did not keep the fence open")
	}
	// Paused: the clock runs on while no renewal is written.
	clk.SetTime(clk.Now().Add(time.Second))
	if writes() {
		t.Error("the leader writes after the renew deadline passed without a renewal")
	}
	// Resumed, its renewals fail: another replica holds the Lease.
	code = http.StatusConflict
	if err := send(elector, http.MethodPut, lease); err != nil {
		t.Fatal(err)
	}
	if writes() {
		t.Error("a refused renewal opened the fence")
	}
}

func TestIsLeasePath(t *testing.T) {
	for path, want := range map[string]bool{
		"/apis/coordination.k8s.io/v1/namespaces/ops/leases":                    true,
		"/apis/coordination.k8s.io/v1/namespaces/ops/leases/profile-scheduler":  true,
		"/apis/coordination.k8s.io/v1/namespaces/ops/leasecandidates/x":         false,
		"/apis/coordination.k8s.io/v1":                                          false,
		"/api/v1/namespaces/ops/configmaps/leases":                              false,
		"/apis/scheduling.schedprofiles.io/v1alpha1/namespaces/ops/leases/x":    false,
		"/apis/coordination.k8s.io/v1/namespaces/ops/leases/profile-scheduler/": true,
	} {
		if got := isLeasePath(path); got != want {
			t.Errorf("isLeasePath(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestLeaseFenceBehindAPrefix serves the API under a path, as
// cluster-management proxies do: the Lease and the reviews are matched
// after that path only.
func TestLeaseFenceBehindAPrefix(t *testing.T) {
	const lease = "/apis/coordination.k8s.io/v1/namespaces/ops/leases/profile-scheduler"
	server := roundTripper(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
	})
	for _, tt := range []struct {
		name, renewal string
		wantOpen      bool
	}{
		{name: "the Lease under the prefix", renewal: "/k8s/clusters/c-1" + lease, wantOpen: true},
		{name: "the Lease without the prefix", renewal: lease},
		{name: "the Lease under another cluster's prefix", renewal: "/k8s/clusters/c-10" + lease},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fence, err := NewLeaseFence(&rest.Config{Host: "https://proxy.example/k8s/clusters/c-1/"}, 10*time.Second, clocktesting.NewFakePassiveClock(time.Now()))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := fence.ObserveRenewals(server).RoundTrip(httptest.NewRequest(http.MethodPut, "https://proxy.example"+tt.renewal, nil))
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if got := fence.Open(); got != tt.wantOpen {
				t.Errorf("fence open %v after a renewal at %s, want %v", got, tt.renewal, tt.wantOpen)
			}
		})
	}
	fence, err := NewLeaseFence(&rest.Config{Host: "https://proxy.example/k8s/clusters/c-1"}, 10*time.Second, clocktesting.NewFakePassiveClock(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	for path, wantSent := range map[string]bool{
		"/k8s/clusters/c-1/apis/authentication.k8s.io/v1/tokenreviews": true,
		"/apis/authentication.k8s.io/v1/tokenreviews":                  false,
		"/k8s/clusters/c-1/api/v1/namespaces/default/pods/p/binding":   false,
	} {
		_, err := fence.Guard(server).RoundTrip(httptest.NewRequest(http.MethodPost, "https://proxy.example"+path, nil))
		if sent := err == nil; sent != wantSent {
			t.Errorf("POST %s through a closed fence: sent %v, want %v", path, sent, wantSent)
		}
	}
}
