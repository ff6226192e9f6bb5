package extender

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	configv1 "k8s.io/kube-scheduler/config/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// server is a real extender on loopback. It records the requests it got,
// per verb, and answers with the handler of that verb.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	requests map[string][]extenderv1.ExtenderArgs
	binds    []extenderv1.ExtenderBindingArgs
}

func newServer(t *testing.T, handlers map[string]func(args *extenderv1.ExtenderArgs) any) *server {
	t.Helper()
	s := &server{requests: map[string][]extenderv1.ExtenderArgs{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verb := strings.TrimPrefix(r.URL.Path, "/ext/")
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "want a JSON POST", http.StatusBadRequest)
			return
		}
		if verb == "bind" {
			var b extenderv1.ExtenderBindingArgs
			if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			s.mu.Lock()
			s.binds = append(s.binds, b)
			s.mu.Unlock()
			_ = json.NewEncoder(w).Encode(extenderv1.ExtenderBindingResult{})
			return
		}
		var args extenderv1.ExtenderArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.requests[verb] = append(s.requests[verb], args)
		s.mu.Unlock()
		h, ok := handlers[verb]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(h(&args))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) got(verb string) []extenderv1.ExtenderArgs {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[verb]
}

func nodeInfos(names ...string) []*framework.NodeInfo {
	out := make([]*framework.NodeInfo, len(names))
	for i, n := range names {
		ni := framework.NewNodeInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "running-on-" + n, UID: types.UID("uid-" + n)}})
		ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		out[i] = ni
	}
	return out
}

func names(nodes []*framework.NodeInfo) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Node().Name
	}
	return out
}

// loopback allows the extenders tests serve on loopback.
func loopback(t *testing.T) Policy {
	t.Helper()
	p, err := NewPolicy(LoopbackURLPrefixes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func build(t *testing.T, cfgs ...configv1.Extender) []*Extender {
	t.Helper()
	exts, err := New(cfgs, loopback(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return exts
}

// asHandle gives exts as a framework instance's Handle gives them.
func asHandle(exts []*Extender) []framework.Extender {
	out := make([]framework.Extender, len(exts))
	for i, e := range exts {
		out[i] = e
	}
	return out
}

// testPod is the pod every case sends, made afresh so no case can change
// another's.
func testPod() *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pod-uid"}}
}

// keepOnly answers a filter call keeping the named nodes, failing the
// others, and echoing names or nodes as the request carried them.
func keepOnly(keep ...string) func(*extenderv1.ExtenderArgs) any {
	return func(args *extenderv1.ExtenderArgs) any {
		kept := map[string]bool{}
		for _, k := range keep {
			kept[k] = true
		}
		res := extenderv1.ExtenderFilterResult{FailedNodes: extenderv1.FailedNodesMap{}}
		if args.NodeNames != nil {
			var out []string
			for _, n := range *args.NodeNames {
				if kept[n] {
					out = append(out, n)
				} else {
					res.FailedNodes[n] = "not chosen by the extender"
				}
			}
			res.NodeNames = &out
			return res
		}
		res.Nodes = &v1.NodeList{}
		for _, n := range args.Nodes.Items {
			if kept[n.Name] {
				res.Nodes.Items = append(res.Nodes.Items, n)
			} else {
				res.FailedNodes[n.Name] = "not chosen by the extender"
			}
		}
		return res
	}
}

func TestFilter(t *testing.T) {
	for _, cacheCapable := range []bool{false, true} {
		srv := newServer(t, map[string]func(*extenderv1.ExtenderArgs) any{"filter": keepOnly("b")})
		exts := build(t, configv1.Extender{URLPrefix: srv.URL + "/ext", FilterVerb: "filter", NodeCacheCapable: cacheCapable})
		statuses := framework.NewDefaultNodeToStatus()
		in := nodeInfos("a", "b", "c")
		got, err := FindNodesThatPass(t.Context(), asHandle(exts), testPod(), in, statuses)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != in[1] {
			t.Fatalf("nodeCacheCapable=%v: got %v, want the scheduler's own NodeInfo of b", cacheCapable, names(got))
		}
		if st := statuses.Get("a"); st.Code() != framework.Unschedulable || st.Message() != "not chosen by the extender" {
			t.Errorf("status of a = %v", st)
		}
		req := srv.got("filter")[0]
		if cacheCapable != (req.NodeNames != nil) || cacheCapable == (req.Nodes != nil) {
			t.Errorf("nodeCacheCapable=%v sent names %v and nodes %v", cacheCapable, req.NodeNames != nil, req.Nodes != nil)
		}
		if req.Pod == nil || req.Pod.Name != "p" {
			t.Errorf("request pod = %v", req.Pod)
		}
	}
}

func TestFilterUnresolvableWinsAndChains(t *testing.T) {
	first := newServer(t, map[string]func(*extenderv1.ExtenderArgs) any{"filter": func(*extenderv1.ExtenderArgs) any {
		return extenderv1.ExtenderFilterResult{
			NodeNames:                  &[]string{"b", "c"},
			FailedNodes:                extenderv1.FailedNodesMap{"a": "soft"},
			FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{"a": "hard"},
		}
	}})
	second := newServer(t, map[string]func(*extenderv1.ExtenderArgs) any{"filter": keepOnly("c")})
	exts := build(t,
		configv1.Extender{URLPrefix: first.URL + "/ext", FilterVerb: "filter", NodeCacheCapable: true},
		configv1.Extender{URLPrefix: second.URL + "/ext", FilterVerb: "filter", NodeCacheCapable: true})
	statuses := framework.NewDefaultNodeToStatus()
	got, err := FindNodesThatPass(t.Context(), asHandle(exts), testPod(), nodeInfos("a", "b", "c"), statuses)
	if err != nil {
		t.Fatal(err)
	}
	if n := names(got); len(n) != 1 || n[0] != "c" {
		t.Fatalf("got %v, want [c]", n)
	}
	if st := statuses.Get("a"); st.Code() != framework.UnschedulableAndUnresolvable || st.Message() != "hard" {
		t.Errorf("status of a = %v, want the unresolvable one", st)
	}
	if sent := *second.got("filter")[0].NodeNames; len(sent) != 2 {
		t.Errorf("the second extender got %v, want only what the first kept", sent)
	}
}

func TestFilterUnknownNode(t *testing.T) {
	srv := newServer(t, map[string]func(*extenderv1.ExtenderArgs) any{"filter": func(*extenderv1.ExtenderArgs) any {
		return extenderv1.ExtenderFilterResult{NodeNames: &[]string{"elsewhere"}}
	}})
	exts := build(t, configv1.Extender{URLPrefix: srv.URL + "/ext", FilterVerb: "filter", NodeCacheCapable: true})
	_, err := FindNodesThatPass(t.Context(), asHandle(exts), testPod(), nodeInfos("a"), framework.NewDefaultNodeToStatus())
	if err == nil || !strings.Contains(err.Error(), `claims a filtered node "elsewhere" which is not found in the input node list`) {
		t.Fatalf("err = %v", err)
	}
}

func TestFilterErrors(t *testing.T) {
	srv := newServer(t, map[string]func(*extenderv1.ExtenderArgs) any{
		"error": func(*extenderv1.ExtenderArgs) any { return extenderv1.ExtenderFilterResult{Error: "out of licences"} },
	})
	for _, tt := range []struct {
		name, verb, want string
	}{
		{"result error", "error", "out of licences"},
		{"HTTP error", "missing", "failed missing with extender at URL " + srv.URL + "/ext/missing, code 404"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, ignorable := range []bool{false, true} {
				exts := build(t, configv1.Extender{URLPrefix: srv.URL + "/ext", FilterVerb: tt.verb, Ignorable: ignorable})
				in := nodeInfos("a", "b")
				got, err := FindNodesThatPass(t.Context(), asHandle(exts), testPod(), in, framework.NewDefaultNodeToStatus())
				if ignorable {
					if err != nil || len(got) != 2 {
						t.Errorf("ignorable: got %v, %v; want every node and no error", names(got), err)
					}
					continue
				}
				if err == nil || err.Error() != tt.want {
					t.Errorf("err = %v, want %q", err, tt.want)
				}
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		<-release
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	for _, ignorable := range []bool{false, true} {
		exts := build(t, configv1.Extender{URLPrefix: slow.URL, FilterVerb: "filter", HTTPTimeout: metav1.Duration{Duration: 200 * time.Millisecond}, Ignorable: ignorable})
		start := time.Now()
		got, err := FindNodesThatPass(t.Context(), asHandle(exts), testPod(), nodeInfos("a"), framework.NewDefaultNodeToStatus())
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("the call took %v with httpTimeout 200ms", d)
		}
		if ignorable && (err != nil || len(got) != 1) {
			t.Errorf("ignorable extender timing out: got %v, %v", names(got), err)
		}
		if !ignorable && (err == nil || !strings.Contains(err.Error(), "Timeout")) {
			t.Errorf("err = %v, want a client timeout", err)
		}
	}
}

func TestDefaultTimeout(t *testing.T) {
	e, err := newExtender(&configv1.Extender{URLPrefix: "http://127.0.0.1:1"}, loopback(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.client.Timeout != DefaultTimeout {
		t.Errorf("timeout = %v, want %v", e.client.Timeout, DefaultTimeout)
	}
}

func TestAddScores(t *testing.T) {
	prio := func(scores map[string]int64) func(*extenderv1.ExtenderArgs) any {
		return func(args *extenderv1.ExtenderArgs) any {
			var out extenderv1.HostPriorityList
			for _, n := range *args.NodeNames {
				out = append(out, extenderv1.HostPriority{Host: n, Score: scores[n]})
			}
			out = append(out, extenderv1.HostPriority{Host: "not-sent", Score: 10})
			return out
		}
	}
	a := newServer(t, map[string]func(*extenderv1.ExtenderArgs) any{"prio": prio(map[string]int64{"a": 10, "b": 3})})
	b := newServer(t, map[string]func(*extenderv1.ExtenderArgs) any{"prio": prio(map[string]int64{"b": 5})})
	exts := build(t,
		configv1.Extender{URLPrefix: a.URL + "/ext", PrioritizeVerb: "prio", Weight: 2, NodeCacheCapable: true},
		configv1.Extender{URLPrefix: b.URL + "/ext", PrioritizeVerb: "prio", Weight: 1, NodeCacheCapable: true},
		configv1.Extender{URLPrefix: a.URL + "/ext", PrioritizeVerb: "broken", Weight: 1, NodeCacheCapable: true})
	nodes := nodeInfos("a", "b")
	scores := []framework.NodePluginScores{{Name: "a", TotalScore: 7}, {Name: "b", TotalScore: 0}}
	AddScores(t.Context(), asHandle(exts), testPod(), nodes, scores)
	// score × weight × MaxNodeScore/MaxExtenderPriority (100/10).
	if scores[0].TotalScore != 7+10*2*10 {
		t.Errorf("a: total %d", scores[0].TotalScore)
	}
	if scores[1].TotalScore != 3*2*10+5*1*10 {
		t.Errorf("b: total %d", scores[1].TotalScore)
	}
	if len(scores[1].Scores) != 2 || scores[1].Scores[0].Name != a.URL+"/ext" && scores[1].Scores[1].Name != a.URL+"/ext" {
		t.Errorf("b: breakdown %v, want one entry per extender named by urlPrefix", scores[1].Scores)
	}
}

func TestManagedResources(t *testing.T) {
	srv := newServer(t, map[string]func(*extenderv1.ExtenderArgs) any{"filter": keepOnly()})
	exts := build(t, configv1.Extender{URLPrefix: srv.URL + "/ext", FilterVerb: "filter",
		ManagedResources: []configv1.ExtenderManagedResource{{Name: "example.com/gpu"}}})
	gpuPod := testPod()
	gpuPod.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{"example.com/gpu": resource.MustParse("1")}}}}

	got, err := FindNodesThatPass(t.Context(), asHandle(exts), testPod(), nodeInfos("a"), framework.NewDefaultNodeToStatus())
	if err != nil || len(got) != 1 || len(srv.got("filter")) != 0 {
		t.Errorf("a pod without the resource: got %v, %v, %d calls; want it unfiltered and no call", names(got), err, len(srv.got("filter")))
	}
	got, err = FindNodesThatPass(t.Context(), asHandle(exts), gpuPod, nodeInfos("a"), framework.NewDefaultNodeToStatus())
	if err != nil || len(got) != 0 || len(srv.got("filter")) != 1 {
		t.Errorf("a pod with the resource: got %v, %v; want the extender to filter it", names(got), err)
	}
	if bound, err := Bind(t.Context(), asHandle(build(t, configv1.Extender{URLPrefix: srv.URL + "/ext", BindVerb: "bind",
		ManagedResources: []configv1.ExtenderManagedResource{{Name: "example.com/gpu"}}})), testPod(), "a"); bound || err != nil {
		t.Errorf("bind of a pod the binder is not interested in: bound %v, %v", bound, err)
	}
}

func TestBind(t *testing.T) {
	srv := newServer(t, nil)
	exts := build(t,
		configv1.Extender{URLPrefix: "http://127.0.0.1:1/unreachable", FilterVerb: "filter"},
		configv1.Extender{URLPrefix: srv.URL + "/ext", BindVerb: "bind"})
	bound, err := Bind(t.Context(), asHandle(exts), testPod(), "node-1")
	if !bound || err != nil {
		t.Fatalf("bound %v, %v", bound, err)
	}
	want := extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "ns", PodUID: "pod-uid", Node: "node-1"}
	if len(srv.binds) != 1 || srv.binds[0] != want {
		t.Errorf("binds = %+v, want %+v", srv.binds, want)
	}

	ignorable := build(t, configv1.Extender{URLPrefix: srv.URL + "/ext", BindVerb: "missing", Ignorable: true})
	if bound, err := Bind(t.Context(), asHandle(ignorable), testPod(), "node-1"); bound || err != nil {
		t.Errorf("ignorable failing binder: bound %v, %v; want the Bind plugins to run", bound, err)
	}
	failing := build(t, configv1.Extender{URLPrefix: srv.URL + "/ext", BindVerb: "missing"})
	if bound, err := Bind(t.Context(), asHandle(failing), testPod(), "node-1"); !bound || err == nil {
		t.Errorf("failing binder: bound %v, %v; want its error", bound, err)
	}
}

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfgs []configv1.Extender
		want string
	}{
		{"valid", []configv1.Extender{{URLPrefix: "http://e", PrioritizeVerb: "p", Weight: 1, BindVerb: "b",
			ManagedResources: []configv1.ExtenderManagedResource{{Name: "example.com/gpu"}}}}, ""},
		{"weight", []configv1.Extender{{URLPrefix: "http://e", PrioritizeVerb: "p"}},
			"extenders[0].weight: Invalid value: 0: must have a positive weight applied to it"},
		{"binders", []configv1.Extender{{URLPrefix: "http://e", BindVerb: "b"}, {URLPrefix: "http://f", BindVerb: "b"}},
			`extenders: Invalid value: "found 2 extenders implementing bind": only one extender can implement bind`},
		{"native resource", []configv1.Extender{{URLPrefix: "http://e", ManagedResources: []configv1.ExtenderManagedResource{{Name: "cpu"}}}},
			`extenders[0].managedResources[0].name: Invalid value: "cpu": is an invalid extended resource name`},
		{"duplicate resource", []configv1.Extender{
			{URLPrefix: "http://e", ManagedResources: []configv1.ExtenderManagedResource{{Name: "example.com/gpu"}}},
			{URLPrefix: "http://f", ManagedResources: []configv1.ExtenderManagedResource{{Name: "example.com/gpu"}}}},
			`extenders[1].managedResources[0].name: Invalid value: "example.com/gpu": duplicate extender managed resource name`},
		{"timeout", []configv1.Extender{{URLPrefix: "http://e", HTTPTimeout: metav1.Duration{Duration: -time.Second}}},
			`extenders[0].httpTimeout: Invalid value: "-1s": must not be negative`},
		{"every verb at the cap", []configv1.Extender{{URLPrefix: "http://e", FilterVerb: "f", PreemptVerb: "p", PrioritizeVerb: "s", Weight: 1, BindVerb: "b",
			HTTPTimeout: metav1.Duration{Duration: MaxHTTPTimeout}}}, ""},
		{"timeout above the cap", []configv1.Extender{{URLPrefix: "http://e", FilterVerb: "f", HTTPTimeout: metav1.Duration{Duration: time.Minute}}},
			`extenders[0].httpTimeout: Invalid value: "1m0s": must be at most 10s: the scheduling loop waits for filter and preempt calls, and a longer wait would hold up every profile`},
		{"timeouts adding up beyond a cycle's share", []configv1.Extender{
			{URLPrefix: "http://e", FilterVerb: "f", PreemptVerb: "p", HTTPTimeout: metav1.Duration{Duration: 8 * time.Second}},
			{URLPrefix: "http://f", FilterVerb: "f", PreemptVerb: "p"},
			{URLPrefix: "http://e", PrioritizeVerb: "s", Weight: 1, HTTPTimeout: metav1.Duration{Duration: 9 * time.Second}},
			{URLPrefix: "http://f", PrioritizeVerb: "s", Weight: 1, BindVerb: "b", HTTPTimeout: metav1.Duration{Duration: 10 * time.Second}}},
			// Filters twice: 2×8+2×5, preempts 8+5, plus the longest prioritize call; bind is off the loop.
			`extenders: Invalid value: "49s": the extenders' filter calls (twice for a pod with a nominated node) and preempt calls, one after the other, and their longest prioritize call may take this long in one scheduling cycle, more than 40s; lower httpTimeout or use fewer extenders`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			policy, err := NewPolicy([]string{"http://e", "http://f"}, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(tt.cfgs, policy, nil)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(extenderv1.ExtenderBindingResult{})
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	for _, tt := range []struct {
		name    string
		tls     *configv1.ExtenderTLSConfig
		wantErr bool
	}{
		// Upstream skips verification when HTTPS has no CA.
		{"no CA", nil, false},
		{"its CA", &configv1.ExtenderTLSConfig{CAData: ca}, false},
		{"its CA and a server name in its certificate", &configv1.ExtenderTLSConfig{CAData: ca, ServerName: "example.com"}, false},
		{"a server name not in its certificate", &configv1.ExtenderTLSConfig{CAData: ca, ServerName: "elsewhere.test"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			exts := build(t, configv1.Extender{URLPrefix: srv.URL, BindVerb: "bind", EnableHTTPS: true, TLSConfig: tt.tls})
			_, err := Bind(context.Background(), asHandle(exts), testPod(), "n")
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestObserver(t *testing.T) {
	var up sync.Mutex
	down := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		up.Lock()
		defer up.Unlock()
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(extenderv1.ExtenderFilterResult{NodeNames: &[]string{"a"}})
	}))
	t.Cleanup(srv.Close)
	var got []string
	observe := func(url string, err error) {
		got = append(got, fmt.Sprintf("%s: %v", url, err))
	}
	cfgs := []configv1.Extender{
		{URLPrefix: srv.URL, FilterVerb: "filter", NodeCacheCapable: true},
		{URLPrefix: srv.URL + "/ignorable", FilterVerb: "filter", NodeCacheCapable: true, Ignorable: true},
	}
	exts, err := New(cfgs, loopback(t), observe)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, _, _, _ = exts[0].Filter(t.Context(), testPod(), nodeInfos("a"))
		_, _, _, _ = exts[1].Filter(t.Context(), testPod(), nodeInfos("a"))
	}
	up.Lock()
	down = false
	up.Unlock()
	for range 2 {
		_, _, _, _ = exts[0].Filter(t.Context(), testPod(), nodeInfos("a"))
	}
	want := []string{
		fmt.Sprintf("%s: failed filter with extender at URL %s/filter, code 503", srv.URL, srv.URL),
		srv.URL + ": <nil>",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
}
