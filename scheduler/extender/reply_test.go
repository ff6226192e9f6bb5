package extender

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
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
		_, _ = w.Write([]byte(body))
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
			got, err := ProcessPreemption(t.Context(), exts, testPod(), sent())
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
	_, err := FindNodesThatPass(t.Context(), exts, testPod(), nodeInfos("a"), framework.NewDefaultNodeToStatus())
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
		_, err := FindNodesThatPass(t.Context(), exts, testPod(), nodeInfos("a"), statuses)
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
	if _, err := FindNodesThatPass(t.Context(), exts, testPod(), nodeInfos("a"), statuses); err != nil {
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
