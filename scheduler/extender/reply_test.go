package extender

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	configv1 "k8s.io/kube-scheduler/config/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// rawServer answers every call with body.
func rawServer(t *testing.T, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func victimPod(uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "victim-" + uid, UID: types.UID(uid)}}
}

// victimUIDs is what victims hold, by node, to compare.
func victimUIDs(victims map[string]*extenderv1.Victims) map[string][]string {
	out := map[string][]string{}
	for node, v := range victims {
		out[node] = []string{}
		for _, p := range v.Pods {
			out[node] = append(out[node], string(p.UID))
		}
	}
	return out
}

// TestPreemptReply: the extender may drop candidates and victims, as
// upstream lets it, but not reach beyond what it was sent: a node that
// was not a candidate or a pod not proposed as a victim on that node
// refuses the whole reply, whatever else it says.
func TestPreemptReply(t *testing.T) {
	sent := func() map[string]*extenderv1.Victims {
		return map[string]*extenderv1.Victims{
			"a": {Pods: []*v1.Pod{victimPod("a-1"), victimPod("a-2")}, NumPDBViolations: 1},
			"b": {Pods: []*v1.Pod{victimPod("b-1")}},
		}
	}
	for _, tt := range []struct {
		name      string
		reply     string
		ignorable bool
		want      map[string][]string
		wantErr   string
	}{
		{name: "every candidate", reply: `{"nodeNameToMetaVictims":{"a":{"pods":[{"uid":"a-1"},{"uid":"a-2"}]},"b":{"pods":[{"uid":"b-1"}]}}}`,
			want: map[string][]string{"a": {"a-1", "a-2"}, "b": {"b-1"}}},
		{name: "fewer candidates and victims", reply: `{"nodeNameToMetaVictims":{"a":{"pods":[{"uid":"a-2"}]}}}`,
			want: map[string][]string{"a": {"a-2"}}},
		{name: "no candidate", reply: `{}`, want: map[string][]string{}},
		{name: "a node that was not a candidate", reply: `{"nodeNameToMetaVictims":{"a":{"pods":[{"uid":"a-1"}]},"kube-system-node":{"pods":[{"uid":"coredns"}]}}}`,
			wantErr: `/preempt: it names node "kube-system-node", which was not a candidate`},
		{name: "a pod not proposed", reply: `{"nodeNameToMetaVictims":{"a":{"pods":[{"uid":"a-1"},{"uid":"coredns"}]}}}`,
			wantErr: `/preempt: it names pod UID "coredns" on node "a", which was not proposed as a victim there`},
		{name: "a victim proposed on another node", reply: `{"nodeNameToMetaVictims":{"a":{"pods":[{"uid":"b-1"}]}}}`,
			wantErr: `it names pod UID "b-1" on node "a", which was not proposed as a victim there`},
		{name: "a null victim", reply: `{"nodeNameToMetaVictims":{"a":{"pods":[null]}}}`,
			wantErr: `it names pod UID "" on node "a", which was not proposed as a victim there`},
		{name: "a null node entry, as upstream a node without victims", reply: `{"nodeNameToMetaVictims":{"a":null}}`,
			wantErr: `expected at least one victim pod on node "a"`},
		{name: "an ignorable extender's refused reply is skipped", ignorable: true,
			reply: `{"nodeNameToMetaVictims":{"c":{"pods":[{"uid":"c-1"}]}}}`,
			want:  map[string][]string{"a": {"a-1", "a-2"}, "b": {"b-1"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := rawServer(t, tt.reply)
			var observed []error
			exts, err := New([]configv1.Extender{{URLPrefix: srv.URL, PreemptVerb: "preempt", NodeCacheCapable: true, Ignorable: tt.ignorable}}, loopback(t),
				func(_ string, err error) { observed = append(observed, err) })
			if err != nil {
				t.Fatal(err)
			}
			got, err := ProcessPreemption(t.Context(), asHandle(exts), testPod(), sent())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, victimUIDs(got)); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
			if tt.ignorable {
				var re *ReplyError
				if len(observed) != 1 || !errors.As(observed[0], &re) {
					t.Errorf("observed %v, want the refused reply of the ignorable extender reported", observed)
				}
			}
		})
	}
}

// TestReplySize: a reply larger than the request plus the policy's
// margin is refused after reading no more than that, and what an
// extender says in a reply that fits reaches statuses clipped.
func TestReplySize(t *testing.T) {
	const huge = 256 << 20
	chunk := []byte(strings.Repeat("x", 64<<10))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"error":"`))
		for range huge / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		_, _ = w.Write([]byte(`"}`))
	}))
	t.Cleanup(srv.Close)
	exts := build(t, configv1.Extender{URLPrefix: srv.URL, FilterVerb: "filter", NodeCacheCapable: true})

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := FindNodesThatPass(t.Context(), asHandle(exts), testPod(), nodeInfos("a"), framework.NewDefaultNodeToStatus())
	runtime.ReadMemStats(&after)
	var re *ReplyError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), fmt.Sprintf("/filter: it is larger than %d bytes", DefaultMaxReplyBytes+len(mustJSON(t, exts[0].args(testPod(), nodeInfos("a")))))) {
		t.Fatalf("err = %v, want the reply refused for its size", err)
	}
	// Read whole, the reply and its copy as a string would take over
	// 512 MiB; refused at the limit, a few times the limit at most.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8*DefaultMaxReplyBytes {
		t.Errorf("allocated %d MiB reading a %d MiB reply, want at most %d MiB", grew>>20, huge>>20, 8*DefaultMaxReplyBytes>>20)
	}

	long := strings.Repeat("é", 100<<10)
	for _, body := range []string{
		fmt.Sprintf(`{"error":%q}`, long),
		fmt.Sprintf(`{"nodeNames":[],"failedNodes":{"a":%q},"failedAndUnresolvableNodes":{"a":%q}}`, long, long),
		fmt.Sprintf(`{"nodeNames":[%q]}`, long),
	} {
		srv := rawServer(t, body)
		exts := build(t, configv1.Extender{URLPrefix: srv.URL, FilterVerb: "filter", NodeCacheCapable: true})
		statuses := framework.NewDefaultNodeToStatus()
		_, err := FindNodesThatPass(t.Context(), asHandle(exts), testPod(), nodeInfos("a"), statuses)
		msg := statuses.Get("a").Message()
		if err != nil {
			msg = err.Error()
		}
		if len(msg) > 2*maxMessageBytes || !strings.Contains(msg, "é...") {
			t.Errorf("a reply of %d bytes gave a message of %d bytes, want it clipped", len(body), len(msg))
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestFailuresOfNodesNotSent: the reasons a filter reply gives for nodes
// it was not sent are dropped, so that the pod's message counts only
// nodes that exist.
func TestFailuresOfNodesNotSent(t *testing.T) {
	srv := rawServer(t, `{"nodeNames":[],"failedNodes":{"a":"full","ghost-1":"full"},"failedAndUnresolvableNodes":{"ghost-2":"gone"}}`)
	exts := build(t, configv1.Extender{URLPrefix: srv.URL, FilterVerb: "filter", NodeCacheCapable: true})
	statuses := framework.NewDefaultNodeToStatus()
	if _, err := FindNodesThatPass(t.Context(), asHandle(exts), testPod(), nodeInfos("a"), statuses); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, n := range []string{"a", "ghost-1", "ghost-2"} {
		if st := statuses.Get(n); st.Code() != framework.UnschedulableAndUnresolvable || st.Message() != "" {
			got[n] = st.Message()
		}
	}
	if diff := cmp.Diff(map[string]string{"a": "full"}, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
}

// repeated is a JSON array of n copies of elem.
func repeated(elem string, n int) string {
	return "[" + strings.Repeat(elem+",", n-1) + elem + "]"
}

// TestReplyMemory: a reply within the size limit costs what was sent,
// not what it lists: each list is read one element at a time, only what
// the operator uses of an element is kept, and a list longer than what
// was sent is refused. Decoded into upstream's result types, the first
// reply below would become a hundred thousand v1.Nodes, hundreds of MiB.
func TestReplyMemory(t *testing.T) {
	const n = 100_000
	for _, tt := range []struct {
		name    string
		cfg     configv1.Extender
		reply   string
		wantErr string
	}{
		{name: "empty nodes", cfg: configv1.Extender{FilterVerb: "filter"},
			reply:   `{"nodes":{"items":` + repeated(`{}`, n) + `}}`,
			wantErr: `/filter: it claims a filtered node "" which is not found in the input node list`},
		{name: "a node name over and over", cfg: configv1.Extender{FilterVerb: "filter", NodeCacheCapable: true},
			reply:   `{"nodeNames":` + repeated(`"a"`, n) + `}`,
			wantErr: `/filter: it claims the filtered node "a" twice`},
		{name: "a node over and over", cfg: configv1.Extender{FilterVerb: "filter"},
			reply:   `{"nodes":{"items":` + repeated(`{"metadata":{"name":"a"}}`, n) + `}}`,
			wantErr: `/filter: it claims the filtered node "a" twice`},
		{name: "scores", cfg: configv1.Extender{PrioritizeVerb: "prioritize", Weight: 1},
			reply:   repeated(`{"host":"a","score":1}`, n),
			wantErr: `/prioritize: it scores node "a" twice`},
		{name: "a victim over and over", cfg: configv1.Extender{PreemptVerb: "preempt", NodeCacheCapable: true},
			reply:   `{"nodeNameToMetaVictims":{"a":{"pods":` + repeated(`{"uid":"a-1"}`, n) + `}}}`,
			wantErr: `/preempt: it names pod UID "a-1" on node "a" twice`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := rawServer(t, tt.reply)
			tt.cfg.URLPrefix = srv.URL
			e := build(t, tt.cfg)[0]
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err := callOnce(t.Context(), e)
			runtime.ReadMemStats(&after)
			var re *ReplyError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want the reply refused: %q", err, tt.wantErr)
			}
			// The reply is held whole while it is decoded (growing its
			// buffer by doubling; a map's member once more), and no
			// more than one element is decoded past what was sent.
			if grew, bound := after.TotalAlloc-before.TotalAlloc, uint64(8*len(tt.reply)+1<<20); grew > bound {
				t.Errorf("allocated %d KiB for a reply of %d KiB, want at most %d KiB", grew>>10, len(tt.reply)>>10, bound>>10)
			}
		})
	}
}

func TestReplyLimit(t *testing.T) {
	for _, tt := range []struct {
		request, margin, want int64
	}{
		{request: 1000, margin: DefaultMaxReplyBytes, want: 1000 + DefaultMaxReplyBytes},
		{request: 80 << 20, margin: DefaultMaxReplyBytes, want: MaxReplyBytesCap},
		{request: 1, margin: MaxReplyBytesCap, want: MaxReplyBytesCap},
	} {
		if got, _ := replyLimit(tt.request, tt.margin); got != tt.want {
			t.Errorf("replyLimit(%d, %d) = %d, want %d", tt.request, tt.margin, got, tt.want)
		}
	}
}

// TestRepeatedInReply: naming a node or a victim twice refuses the
// reply; upstream would list the node twice among the feasible ones, add
// its scores or delete the victim twice.
func TestRepeatedInReply(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cfg   configv1.Extender
		reply string
		want  string
	}{
		{name: "a kept node", cfg: configv1.Extender{FilterVerb: "filter", NodeCacheCapable: true},
			reply: `{"nodeNames":["a","b","a"]}`, want: `it claims the filtered node "a" twice`},
		{name: "a failed node", cfg: configv1.Extender{FilterVerb: "filter", NodeCacheCapable: true},
			reply: `{"nodeNames":[],"failedNodes":{"a":"full","a":"full"}}`, want: `it gives node "a" a reason twice`},
		{name: "a scored node", cfg: configv1.Extender{PrioritizeVerb: "prioritize", Weight: 1},
			reply: `[{"host":"a","score":1},{"host":"b","score":1},{"host":"a","score":1}]`, want: `it scores node "a" twice`},
		{name: "a victim", cfg: configv1.Extender{PreemptVerb: "preempt", NodeCacheCapable: true},
			reply: `{"nodeNameToMetaVictims":{"a":{"pods":[{"uid":"a-1"},{"uid":"a-1"}]}}}`, want: `it names pod UID "a-1" on node "a" twice`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := rawServer(t, tt.reply)
			tt.cfg.URLPrefix = srv.URL
			err := callOnce(t.Context(), build(t, tt.cfg)[0])
			var re *ReplyError
			if !errors.As(err, &re) || !strings.HasSuffix(err.Error(), tt.want) {
				t.Errorf("err = %v, want the reply refused: %q", err, tt.want)
			}
		})
	}
}

// callOnce calls e's one verb with nodes a and b, or victims a-1 and a-2
// on node a.
func callOnce(ctx context.Context, e *Extender) error {
	var err error
	switch {
	case e.IsFilter():
		_, _, _, err = e.Filter(ctx, testPod(), nodeInfos("a", "b"))
	case e.IsPrioritizer():
		_, _, err = e.Prioritize(ctx, testPod(), nodeInfos("a", "b"))
	default:
		_, err = e.ProcessPreemption(ctx, testPod(), map[string]*extenderv1.Victims{"a": {Pods: []*v1.Pod{victimPod("a-1"), victimPod("a-2")}}})
	}
	return err
}

// TestReasonBudget: each node may have its own reason, but past
// maxReasonBytes of distinct reasons in one reply the others become one,
// naming the extender, so that the pod's message stays small.
func TestReasonBudget(t *testing.T) {
	const n = 5000
	sent := make([]string, n)
	failed := map[string]string{}
	for i := range sent {
		sent[i] = fmt.Sprint("node-", i)
		failed[sent[i]] = fmt.Sprintf("%s is full: %s", sent[i], strings.Repeat("x", 100))
	}
	srv := rawServer(t, string(mustJSON(t, extenderv1.ExtenderFilterResult{NodeNames: &[]string{}, FailedAndUnresolvableNodes: failed})))
	exts := build(t, configv1.Extender{URLPrefix: srv.URL, FilterVerb: "filter", NodeCacheCapable: true})
	statuses := framework.NewDefaultNodeToStatus()
	if _, err := FindNodesThatPass(t.Context(), asHandle(exts), testPod(), nodeInfos(sent...), statuses); err != nil {
		t.Fatal(err)
	}
	distinct := map[string]int{}
	for _, name := range sent {
		distinct[statuses.Get(name).Message()]++
	}
	total := 0
	for msg := range distinct {
		total += len(msg)
	}
	overflow := "node(s) were refused by extender " + srv.URL
	if total > maxReasonBytes+len(overflow) || distinct[overflow] == 0 {
		t.Errorf("%d distinct reasons of %d bytes in all, %d nodes with %q; want at most %d bytes", len(distinct), total, distinct[overflow], overflow, maxReasonBytes+len(overflow))
	}
	if got := distinct[failed["node-0"]]; got != 1 {
		t.Errorf("the first node's own reason is given %d times, want once", got)
	}
}

// TestTransportErrorsClipped: what the transport quotes of a reply (a
// status line, headers, a redirect's Location) reaches the pod's
// condition clipped, and headers are not read past a small bound.
func TestTransportErrorsClipped(t *testing.T) {
	long := strings.Repeat("x", 5<<20)
	for _, tt := range []struct {
		name  string
		reply []byte
	}{
		{name: "a malformed status line", reply: []byte("HTTP/1.1 200" + long + "\r\n\r\n")},
		{name: "a long header", reply: []byte("HTTP/1.1 200 OK\r\nX-Long: " + long + "\r\nContent-Length: 2\r\n\r\n{}")},
		{name: "a long redirect", reply: []byte("HTTP/1.1 307 Temporary Redirect\r\nLocation: /" + long[:1<<15] + "%zz\r\nContent-Length: 0\r\n\r\n")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			url := rawTCPServer(t, tt.reply)
			exts := build(t, configv1.Extender{URLPrefix: url, FilterVerb: "filter", NodeCacheCapable: true})
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := FindNodesThatPass(t.Context(), asHandle(exts), testPod(), nodeInfos("a"), framework.NewDefaultNodeToStatus())
			runtime.ReadMemStats(&after)
			if err == nil || len(err.Error()) > maxMessageBytes {
				t.Errorf("err of %d bytes, want an error of at most %d", len(fmt.Sprint(err)), maxMessageBytes)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
				t.Errorf("allocated %d KiB reading the reply, want at most 1 MiB", grew>>10)
			}
		})
	}
}

// rawTCPServer answers each request on loopback with reply, whatever
// HTTP says.
func rawTCPServer(t *testing.T, reply []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = conn.Close() }()
				_, _ = http.ReadRequest(bufio.NewReader(conn))
				_, _ = conn.Write(reply)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestIgnorableRefusalReported: an ignorable extender's refused reply is
// reported, and only a reply it accepts ends that; its other failures
// are skipped, as upstream skips them, rather than reported as recovery.
func TestIgnorableRefusalReported(t *testing.T) {
	var mu sync.Mutex
	reply := `{"nodeNames":["ghost"]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if reply == "" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, reply)
	}))
	t.Cleanup(srv.Close)
	var got []string
	exts, err := New([]configv1.Extender{{URLPrefix: srv.URL, FilterVerb: "filter", NodeCacheCapable: true, Ignorable: true}}, loopback(t),
		func(_ string, err error) { got = append(got, fmt.Sprint(err)) })
	if err != nil {
		t.Fatal(err)
	}
	refused := fmt.Sprintf(`refused the reply of the extender at URL %s/filter: it claims a filtered node "ghost" which is not found in the input node list`, srv.URL)
	for _, step := range []struct {
		reply string
		want  []string
	}{
		{reply: `{"nodeNames":["ghost"]}`, want: []string{refused}},
		{reply: "", want: []string{refused}},
		{reply: `{"nodeNames":["a"]}`, want: []string{refused, "<nil>"}},
	} {
		mu.Lock()
		reply = step.reply
		mu.Unlock()
		_, _, _, _ = exts[0].Filter(t.Context(), testPod(), nodeInfos("a"))
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("after the reply %q, observed (-want +got):\n%s", step.reply, diff)
		}
	}
}
