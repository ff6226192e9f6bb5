package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/sets"
	restclient "k8s.io/client-go/rest"
	configv1 "k8s.io/kube-scheduler/config/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// DefaultTimeout bounds a call to an extender whose httpTimeout is unset,
// as upstream's DefaultExtenderTimeout.
const DefaultTimeout = 5 * time.Second

// Extender is one HTTP extender of a profile. Its methods are safe for
// concurrent use: the configuration is read-only after New.
type Extender struct {
	url              string
	preemptVerb      string
	filterVerb       string
	prioritizeVerb   string
	bindVerb         string
	weight           int64
	client           *http.Client
	maxReplyBytes    int64
	nodeCacheCapable bool
	managedResources sets.Set[string]
	ignorable        bool

	// observer, when set, is told when calls start or stop failing: any
	// failure of a non-ignorable extender, and a refused reply of any
	// extender (see report). mu serializes the transitions so the observer sees them
	// in the order they happened, and guards failing and refused.
	observer Observer
	mu       sync.Mutex
	failing  bool
	refused  bool
}

// Observer is told that calls to the extender named by urlPrefix started
// failing (err is the first failure, a *ReplyError when its reply was
// refused), fail in another way (a refused reply after other failures, or
// the reverse) or succeed again (err is nil). It is called on the calling
// goroutine, under a lock: it must not block.
type Observer func(urlPrefix string, err error)

// ReplyError is a reply the operator refused: larger than the policy
// allows, or reaching beyond what the extender was sent (a node that was
// not a candidate, a victim that was not proposed). The call fails as for
// any error; unlike other errors it is reported for ignorable extenders
// too, since the extender misbehaves rather than being down.
type ReplyError struct {
	// URL is the call's.
	URL string
	// Reason says what was refused.
	Reason string
}

func (e *ReplyError) Error() string {
	return fmt.Sprintf("refused the reply of the extender at URL %s: %s", e.URL, e.Reason)
}

// maxMessageBytes bounds what of an extender's own text (an error, a
// reason a node was refused, a node name or UID quoted in an error) goes
// into statuses, conditions and logs: kept whole, a reply of a few MiB
// would land in every pod's condition.
const maxMessageBytes = 1024

// clip shortens s to maxMessageBytes, on a rune boundary.
func clip(s string) string {
	if len(s) <= maxMessageBytes {
		return s
	}
	const ellipsis = "..."
	cut := maxMessageBytes - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// maxRedirects is the limit of Go's default redirect policy.
const maxRedirects = 10

// redirectsWithin is Go's default redirect policy, which upstream's
// client follows, limited to the URLs policy allows.
func redirectsWithin(policy Policy) func(req *http.Request, via []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if !policy.allows(req.URL.String()) {
			return fmt.Errorf("redirected to %s, which is not under a URL prefix the operator allows", clip(req.URL.String()))
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
}

// newExtender builds the client of one extender. cfg's TLS data fields
// hold the material the caller resolved (from Secrets); file fields are
// honoured as upstream does, for callers that have files. The client
// follows a redirect, as upstream's, only to a URL policy allows.
func newExtender(cfg *configv1.Extender, policy Policy, observer Observer) (*Extender, error) {
	timeout := cfg.HTTPTimeout.Duration
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	transport, err := makeTransport(cfg)
	if err != nil {
		return nil, err
	}
	managed := sets.New[string]()
	for _, r := range cfg.ManagedResources {
		managed.Insert(r.Name)
	}
	return &Extender{
		url:              cfg.URLPrefix,
		preemptVerb:      cfg.PreemptVerb,
		filterVerb:       cfg.FilterVerb,
		prioritizeVerb:   cfg.PrioritizeVerb,
		bindVerb:         cfg.BindVerb,
		weight:           cfg.Weight,
		client:           &http.Client{Transport: transport, Timeout: timeout, CheckRedirect: redirectsWithin(policy)},
		maxReplyBytes:    policy.maxReplyBytes,
		nodeCacheCapable: cfg.NodeCacheCapable,
		managedResources: managed,
		ignorable:        cfg.Ignorable,
		observer:         observer,
	}, nil
}

// maxResponseHeaderBytes bounds the status line and headers of a reply.
const maxResponseHeaderBytes = 64 << 10

// makeTransport is upstream's: HTTPS without a CA means the extender's
// certificate is not verified.
func makeTransport(cfg *configv1.Extender) (http.RoundTripper, error) {
	var rc restclient.Config
	if t := cfg.TLSConfig; t != nil {
		rc.TLSClientConfig = restclient.TLSClientConfig{
			Insecure:   t.Insecure,
			ServerName: t.ServerName,
			CertFile:   t.CertFile,
			KeyFile:    t.KeyFile,
			CAFile:     t.CAFile,
			CertData:   t.CertData,
			KeyData:    t.KeyData,
			CAData:     t.CAData,
		}
	}
	if cfg.EnableHTTPS && len(rc.CAFile) == 0 && len(rc.CAData) == 0 {
		rc.Insecure = true
	}
	tlsConfig, err := restclient.TLSConfigFor(&rc)
	if err != nil {
		return nil, err
	}
	// Go allows response headers of 10 MiB; an extender's reply needs a
	// few hundred bytes of them.
	return utilnet.SetTransportDefaults(&http.Transport{TLSClientConfig: tlsConfig, MaxResponseHeaderBytes: maxResponseHeaderBytes}), nil
}

// Name is the extender's urlPrefix, as upstream.
func (h *Extender) Name() string { return h.url }

// String makes log lines name the extender rather than dump it.
func (h *Extender) String() string { return h.url }

// IsIgnorable reports whether a failure of this extender is skipped.
func (h *Extender) IsIgnorable() bool { return h.ignorable }

// IsFilter reports whether the extender has a filter verb.
func (h *Extender) IsFilter() bool { return h.filterVerb != "" }

// IsPrioritizer reports whether the extender has a prioritize verb.
func (h *Extender) IsPrioritizer() bool { return h.prioritizeVerb != "" }

// IsBinder reports whether the extender has a bind verb.
func (h *Extender) IsBinder() bool { return h.bindVerb != "" }

// SupportsPreemption reports whether the extender has a preempt verb.
func (h *Extender) SupportsPreemption() bool { return h.preemptVerb != "" }

// IsInterested reports whether the extender sees pod: it manages no
// resources, or pod's containers or init containers request or limit one
// it manages.
func (h *Extender) IsInterested(pod *v1.Pod) bool {
	if h.managedResources.Len() == 0 {
		return true
	}
	return h.hasManagedResources(pod.Spec.Containers) || h.hasManagedResources(pod.Spec.InitContainers)
}

func (h *Extender) hasManagedResources(containers []v1.Container) bool {
	for i := range containers {
		c := &containers[i]
		for name := range c.Resources.Requests {
			if h.managedResources.Has(string(name)) {
				return true
			}
		}
		for name := range c.Resources.Limits {
			if h.managedResources.Has(string(name)) {
				return true
			}
		}
	}
	return false
}

// Filter asks the extender which of nodes fit pod. The nodes it keeps must
// be among those sent. It also returns the nodes it refused, with reasons:
// failed (Unschedulable) and failedAndUnresolvable.
func (h *Extender) Filter(ctx context.Context, pod *v1.Pod, nodes []*framework.NodeInfo) (feasible []*framework.NodeInfo, failed, failedAndUnresolvable extenderv1.FailedNodesMap, err error) {
	if !h.IsFilter() {
		return nodes, extenderv1.FailedNodesMap{}, extenderv1.FailedNodesMap{}, nil
	}
	byName := make(map[string]*framework.NodeInfo, len(nodes))
	for _, n := range nodes {
		byName[n.Node().Name] = n
	}
	reply := newFilterReply(byName, h.url)
	err = h.send(ctx, h.filterVerb, h.args(pod, nodes), reply)
	if err != nil {
		return nil, nil, nil, err
	}
	if reply.Error != "" {
		return nil, nil, nil, errors.New(clip(reply.Error))
	}
	return reply.kept(h.nodeCacheCapable).nodes, reply.FailedNodes.m, reply.FailedAndUnresolvableNodes.m, nil
}

// Prioritize asks the extender to score nodes for pod (0 to
// extenderv1.MaxExtenderPriority) and returns the scores with the
// extender's weight. An extender without a prioritize verb scores 0.
func (h *Extender) Prioritize(ctx context.Context, pod *v1.Pod, nodes []*framework.NodeInfo) (extenderv1.HostPriorityList, int64, error) {
	if !h.IsPrioritizer() {
		result := make(extenderv1.HostPriorityList, 0, len(nodes))
		for _, n := range nodes {
			result = append(result, extenderv1.HostPriority{Host: n.Node().Name})
		}
		return result, 0, nil
	}
	reply := &scores{sent: sets.New[string](), seen: sets.New[string]()}
	for _, n := range nodes {
		reply.sent.Insert(n.Node().Name)
	}
	if err := h.send(ctx, h.prioritizeVerb, h.args(pod, nodes), reply); err != nil {
		return nil, 0, err
	}
	return reply.list, h.weight, nil
}

// Bind asks the extender to bind pod to node; the extender writes the
// binding to the API server.
func (h *Extender) Bind(ctx context.Context, pod *v1.Pod, node string) error {
	if !h.IsBinder() {
		return errors.New("unexpected empty bindVerb in extender")
	}
	req := &extenderv1.ExtenderBindingArgs{
		PodName:      pod.Name,
		PodNamespace: pod.Namespace,
		PodUID:       pod.UID,
		Node:         node,
	}
	var result extenderv1.ExtenderBindingResult
	if err := h.send(ctx, h.bindVerb, req, &result); err != nil {
		return err
	}
	if result.Error != "" {
		return errors.New(clip(result.Error))
	}
	return nil
}

// args is the request body of filter and prioritize: full nodes, or only
// their names for an extender that caches nodes itself.
func (h *Extender) args(pod *v1.Pod, nodes []*framework.NodeInfo) *extenderv1.ExtenderArgs {
	args := &extenderv1.ExtenderArgs{Pod: pod}
	if h.nodeCacheCapable {
		names := make([]string, 0, len(nodes))
		for _, n := range nodes {
			names = append(names, n.Node().Name)
		}
		args.NodeNames = &names
		return args
	}
	list := &v1.NodeList{Items: make([]v1.Node, 0, len(nodes))}
	for _, n := range nodes {
		list.Items = append(list.Items, *n.Node())
	}
	args.Nodes = list
	return args
}

// send POSTs args as JSON to urlPrefix/action and decodes the reply into
// result. The client's timeout bounds the whole call, body included. A
// reply result refuses while it is decoded (a *refusal) is refused (a
// *ReplyError). Other errors are clipped: the transport's quote what the
// extender sent (a status line, a redirect's Location), which would
// otherwise reach the pod's condition and the logs whole.
func (h *Extender) send(ctx context.Context, action string, args, result any) error {
	err := h.post(ctx, action, args, result)
	var (
		re *ReplyError
		rf *refusal
	)
	switch {
	case errors.As(err, &rf):
		err = &ReplyError{URL: callURL(h.url, action), Reason: rf.reason}
	case err != nil && !errors.As(err, &re):
		err = errors.New(clip(err.Error()))
	}
	if ctx.Err() == nil {
		// A call the scheduler gave up on says nothing of the extender.
		h.report(err)
	}
	return err
}

// report tells the observer when calls start or stop failing. An
// ignorable extender's other failures are skipped, as upstream, so only
// its refused replies count, and only a success ends them.
func (h *Extender) report(err error) {
	if h.observer == nil {
		return
	}
	var re *ReplyError
	refused := errors.As(err, &re)
	if err != nil && h.ignorable && !refused {
		return
	}
	failing := err != nil
	h.mu.Lock()
	defer h.mu.Unlock()
	if failing == h.failing && (!failing || refused == h.refused) {
		return
	}
	h.failing, h.refused = failing, failing && refused
	if failing {
		h.observer(h.url, err)
	} else {
		h.observer(h.url, nil)
	}
}

func (h *Extender) post(ctx context.Context, action string, args, result any) error {
	out, err := json.Marshal(args)
	if err != nil {
		return err
	}
	url := callURL(h.url, action)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(out))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer func() {
		// Drain so the connection is reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("failed %v with extender at URL %v, code %v", action, url, resp.StatusCode)
	}
	limit, why := replyLimit(int64(len(out)), h.maxReplyBytes)
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, limit)).Decode(result); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &ReplyError{URL: url, Reason: fmt.Sprintf("it is larger than %d bytes, %s", limit, why)}
		}
		return err
	}
	return nil
}

// replyLimit is how large a reply to a request of requestBytes may be,
// and why. Upstream decodes replies of any size. A reply needs no more
// room than the request (a filter reply echoes at most the nodes sent)
// plus the policy's margin, and is held whole while it is decoded, so
// never more than MaxReplyBytesCap.
func replyLimit(requestBytes, margin int64) (int64, string) {
	if requestBytes+margin >= MaxReplyBytesCap {
		return MaxReplyBytesCap, "the most the operator reads of any reply"
	}
	return requestBytes + margin, fmt.Sprintf("the request's %d and the %d more the operator allows", requestBytes, margin)
}

// Close releases the extender's idle connections.
func (h *Extender) Close() {
	h.client.CloseIdleConnections()
}

// ProcessPreemption sends the preemption candidates (victims per node) to
// the extender, which returns those it accepts, possibly with fewer
// victims. A nodeCacheCapable extender gets pod UIDs only; the reply, UIDs
// always, is turned back into the pods sent.
func (h *Extender) ProcessPreemption(ctx context.Context, pod *v1.Pod, victims map[string]*extenderv1.Victims) (map[string]*extenderv1.Victims, error) {
	if !h.SupportsPreemption() {
		return nil, fmt.Errorf("preempt verb is not defined for extender %v but run into ProcessPreemption", h.url)
	}
	args := &extenderv1.ExtenderPreemptionArgs{Pod: pod}
	if h.nodeCacheCapable {
		args.NodeNameToMetaVictims = toMetaVictims(victims)
	} else {
		args.NodeNameToVictims = victims
	}
	reply := &preemptReply{NodeNameToMetaVictims: chosenVictims{sent: victims, chosen: map[string]*extenderv1.Victims{}}}
	if err := h.send(ctx, h.preemptVerb, args, reply); err != nil {
		return nil, err
	}
	return reply.NodeNameToMetaVictims.chosen, nil
}

func toMetaVictims(victims map[string]*extenderv1.Victims) map[string]*extenderv1.MetaVictims {
	out := make(map[string]*extenderv1.MetaVictims, len(victims))
	for node, v := range victims {
		mv := &extenderv1.MetaVictims{Pods: make([]*extenderv1.MetaPod, 0, len(v.Pods)), NumPDBViolations: v.NumPDBViolations}
		for _, p := range v.Pods {
			mv.Pods = append(mv.Pods, &extenderv1.MetaPod{UID: string(p.UID)})
		}
		out[node] = mv
	}
	return out
}
