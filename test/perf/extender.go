package main

import (
	"encoding/json"
	"hash/fnv"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// benchExtender is the HTTP extender of the Extender workload, served by
// the harness on loopback. Its answers are cheap and deterministic, so the
// workload measures what calling an extender costs a scheduler: a filter
// call that turns away one node in ten, and a prioritize call that scores
// each node by a hash of its name.
type benchExtender struct {
	server *http.Server
	url    string
	// calls counts the requests answered, so that a run whose scheduler
	// never called the extender fails instead of measuring nothing.
	calls atomic.Int64
}

// extenderBlock is the extender's configuration, the same block for a
// SchedulingProfile's spec.extenders and kube-scheduler's extenders.
func (e *benchExtender) extenderBlock() map[string]any {
	return map[string]any{
		"urlPrefix": e.url, "filterVerb": "filter", "prioritizeVerb": "prioritize",
		"weight": 1, "nodeCacheCapable": true,
	}
}

func startBenchExtender() (*benchExtender, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &benchExtender{url: "http://" + l.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /filter", e.serve(func(names []string) any {
		kept := make([]string, 0, len(names))
		failed := extenderv1.FailedNodesMap{}
		for _, n := range names {
			if strings.HasSuffix(n, "7") {
				failed[n] = "benchmark extender: node name ends in 7"
				continue
			}
			kept = append(kept, n)
		}
		return extenderv1.ExtenderFilterResult{NodeNames: &kept, FailedNodes: failed}
	}))
	mux.HandleFunc("POST /prioritize", e.serve(func(names []string) any {
		scores := make(extenderv1.HostPriorityList, len(names))
		for i, n := range names {
			h := fnv.New32a()
			_, _ = h.Write([]byte(n))
			scores[i] = extenderv1.HostPriority{Host: n, Score: int64(h.Sum32()) % (extenderv1.MaxExtenderPriority + 1)}
		}
		return scores
	}))
	e.server = &http.Server{Handler: mux}
	go func() { _ = e.server.Serve(l) }()
	return e, nil
}

// serve decodes ExtenderArgs (node names only: the extender is
// nodeCacheCapable) and writes what answer returns for them.
func (e *benchExtender) serve(answer func(names []string) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		e.calls.Add(1)
		var args extenderv1.ExtenderArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil || args.NodeNames == nil {
			http.Error(w, "want ExtenderArgs with nodeNames", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer(*args.NodeNames))
	}
}

func (e *benchExtender) stop() { _ = e.server.Close() }
