package operator

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// LeaseFence keeps a replica that may have lost its leader Lease from
// writing to the API server.
//
// client-go's leader election tells a leader that it lost the Lease only
// once a renewal has failed for the whole renew deadline. A leader that was
// paused (SIGSTOP, a stalled VM, a long GC or swap) past the lease duration
// resumes believing it still leads while another replica already does, and
// for up to the renew deadline it binds pods on its stale view, delivers
// decisions and rewrites WaitingPod statuses: two schedulers at once. Only
// the API server's refusal to bind a pod twice stands between that and a
// node overcommitted by a stale binding of a pod the new leader has not
// bound yet. (kube-scheduler has the same window.)
//
// The fence measures the Lease from this side instead: a renewal written
// successfully at time t means no other replica can take the Lease before
// t + lease duration, since every candidate waits that long after it last
// saw the Lease change. The fence lets writes through until t + renew
// deadline only, so a write that passes it reaches the API server with the
// lease duration's margin over the renew deadline to spare, and past it
// every create, update, patch and delete fails at once, without being sent,
// until the next renewal succeeds or the manager gives the Lease up and
// exits. Time is the process's monotonic clock, which runs on while the
// process is stopped, so a paused leader finds its fence closed the moment
// it resumes.
//
// ObserveRenewals wraps the leader election client's transport, Guard the
// transport of every other client of the manager.
type LeaseFence struct {
	window time.Duration
	clock  clock.PassiveClock
	// prefix is the path of the API server's URL, such as
	// /k8s/clusters/c-1 behind a cluster-management proxy, in front of
	// every request's API path; empty for most servers.
	prefix string
	// until is when the fence closes: the start of the last successful
	// Lease write plus window. Nil until the first one.
	until atomic.Pointer[time.Time]
}

// NewLeaseFence returns a fence that stays open for renewDeadline after the
// start of each successful write of the Lease, for the clients of cfg: the
// path of cfg.Host, if any, comes before the API paths of their requests.
func NewLeaseFence(cfg *rest.Config, renewDeadline time.Duration, clk clock.PassiveClock) (*LeaseFence, error) {
	host, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, err
	}
	return &LeaseFence{window: renewDeadline, clock: clk, prefix: strings.TrimSuffix(host.Path, "/")}, nil
}

// Open tells whether this replica surely holds the Lease now.
func (f *LeaseFence) Open() bool {
	until := f.until.Load()
	return until != nil && f.clock.Now().Before(*until)
}

// ObserveRenewals wraps the transport of the leader election client: each
// create or update of a Lease that the API server accepts keeps the fence
// open for the window from when the request started. That client writes
// only this replica's Lease, and only when acquiring or renewing it (and
// once more to release it, after every leader-only runnable has stopped);
// it also posts leader election events, which say nothing.
func (f *LeaseFence) ObserveRenewals(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		start := f.clock.Now()
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode >= 200 && resp.StatusCode < 300 &&
			(req.Method == http.MethodPost || req.Method == http.MethodPut) && isLeasePath(f.apiPath(req)) {
			until := start.Add(f.window)
			f.until.Store(&until)
		}
		return resp, err
	})
}

// Guard wraps the transport of the manager's clients: a request that
// writes fails unless the fence is open. Reads pass, so that standbys keep
// their caches warm, and so do token and access reviews, which the metrics
// endpoint of every replica creates and which change nothing.
func (f *LeaseFence) Guard(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if !isReviewPath(f.apiPath(req)) && !f.Open() {
				return nil, fmt.Errorf("%s %s not sent: this replica has not renewed its leader Lease within the renew deadline (%v), so another replica may lead now", req.Method, req.URL.Path, f.window)
			}
		}
		return rt.RoundTrip(req)
	})
}

// apiPath is the request's path after the server's prefix; a path outside
// the prefix is none of the API's, and matches nothing.
func (f *LeaseFence) apiPath(req *http.Request) string {
	path, ok := strings.CutPrefix(req.URL.Path, f.prefix)
	if !ok || (f.prefix != "" && !strings.HasPrefix(path, "/")) {
		return ""
	}
	return path
}

type roundTripper func(*http.Request) (*http.Response, error)

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return rt(req) }

// isLeasePath matches the collection and the objects of coordination.k8s.io
// Leases in any namespace.
func isLeasePath(path string) bool {
	rest, ok := strings.CutPrefix(path, "/apis/coordination.k8s.io/")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "/")
	// v1/namespaces/NS/leases[/NAME]
	return len(parts) >= 4 && parts[1] == "namespaces" && parts[3] == "leases"
}

// isReviewPath matches TokenReviews and the access reviews, which are
// created to ask a question and never stored.
func isReviewPath(path string) bool {
	return strings.HasPrefix(path, "/apis/authentication.k8s.io/") || strings.HasPrefix(path, "/apis/authorization.k8s.io/")
}
