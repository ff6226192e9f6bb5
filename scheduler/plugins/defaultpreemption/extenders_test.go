package defaultpreemption

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	configv1 "k8s.io/kube-scheduler/config/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// TestPostFilterExtenders runs preemption with a real preempt extender on
// loopback. Without it n1 is chosen (its victim has the lower priority);
// the extender accepts only n2.
func TestPostFilterExtenders(t *testing.T) {
	var mu sync.Mutex
	var got extenderv1.ExtenderPreemptionArgs
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/preempt" {
			http.NotFound(w, r)
			return
		}
		var args extenderv1.ExtenderPreemptionArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = args
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(extenderv1.ExtenderPreemptionResult{
			NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{"n2": args.NodeNameToMetaVictims["n2"]},
		})
	}))
	t.Cleanup(srv.Close)

	nodes := []*v1.Node{makeNode("n1", "2").Obj(), makeNode("n2", "2").Obj()}
	pods := func() []*v1.Pod {
		return []*v1.Pod{placed("low1", "n1", 1, "2", 0).UID("low1").Obj(), placed("low2", "n2", 5, "2", 0).UID("low2").Obj()}
	}
	for _, tt := range []struct {
		name      string
		extenders []configv1.Extender
		wantNode  string
		wantCode  framework.Code
	}{
		{name: "no extender", wantNode: "n1"},
		{name: "the extender narrows the candidates", wantNode: "n2",
			extenders: []configv1.Extender{{URLPrefix: srv.URL, PreemptVerb: "preempt", NodeCacheCapable: true}}},
		{name: "an extender without the preempt verb is not asked", wantNode: "n1",
			extenders: []configv1.Extender{{URLPrefix: srv.URL, FilterVerb: "preempt", NodeCacheCapable: true}}},
		{name: "an ignorable extender that fails is skipped", wantNode: "n1",
			extenders: []configv1.Extender{{URLPrefix: srv.URL, PreemptVerb: "missing", Ignorable: true}}},
		{name: "an extender that fails fails preemption", wantCode: framework.Error,
			extenders: []configv1.Extender{{URLPrefix: srv.URL, PreemptVerb: "missing"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := preemptor(10, "2").UID("preemptor").Obj()
			e := newEnv(t, envConfig{nodes: nodes, pods: append(pods(), p), parallelism: 1, extenders: tt.extenders})
			res, st := e.filterAndPostFilter(t, p)
			if tt.wantCode != framework.Success {
				if st.Code() != tt.wantCode {
					t.Fatalf("status %v, want %v", st, tt.wantCode)
				}
				return
			}
			if !st.IsSuccess() || res == nil || res.NominatedNodeName != tt.wantNode {
				t.Fatalf("result %+v, status %v; want node %s", res, st, tt.wantNode)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if mv := got.NodeNameToMetaVictims["n1"]; mv == nil || len(mv.Pods) != 1 || mv.Pods[0].UID != "low1" || got.NodeNameToVictims != nil {
		t.Errorf("a nodeCacheCapable extender got %+v, want the victims' UIDs only", got)
	}
}
