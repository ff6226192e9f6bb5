package extender

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Replies are decoded into the lean types below rather than into
// upstream's result types, and their lists one element at a time: a
// filter reply of a few MiB of empty nodes ({"nodes":{"items":[{},...]}})
// would otherwise become millions of full v1.Node structs. An entry that
// names a node (or victim) twice, or a kept node or victim that was not
// sent, stops decoding with a *refusal, which the caller turns into a
// *ReplyError; so no list keeps more entries than were sent. Scores and
// reasons of nodes that were not sent are dropped as they are read, as
// upstream drops them.

// refusal stops decoding a reply that reaches beyond what was sent.
type refusal struct{ reason string }

func (r *refusal) Error() string { return r.reason }

func refuse(format string, args ...any) error {
	return &refusal{reason: fmt.Sprintf(format, args...)}
}

// maxReasonBytes bounds the distinct reasons one filter reply gives for
// the nodes it refused. Each is clipped to maxMessageBytes, but the pod's
// unschedulable message lists every distinct reason: a reply with one
// reason per node would put megabytes into it.
const maxReasonBytes = 8 << 10

// filterReply is what the operator reads of an ExtenderFilterResult.
type filterReply struct {
	NodeNames keptNodes `json:"nodeNames"`
	Nodes     struct {
		Items keptNodes `json:"items"`
	} `json:"nodes"`
	FailedNodes                reasons `json:"failedNodes"`
	FailedAndUnresolvableNodes reasons `json:"failedAndUnresolvableNodes"`
	Error                      string  `json:"error"`
}

func newFilterReply(sent map[string]*framework.NodeInfo, extender string) *filterReply {
	rs := &reasonBudget{seen: sets.New[string](), overflow: fmt.Sprintf("node(s) were refused by extender %s", clip(extender))}
	r := &filterReply{
		NodeNames:                  keptNodes{sent: sent, seen: sets.New[string]()},
		FailedNodes:                reasons{sent: sent, budget: rs, m: extenderv1.FailedNodesMap{}},
		FailedAndUnresolvableNodes: reasons{sent: sent, budget: rs, m: extenderv1.FailedNodesMap{}},
	}
	r.Nodes.Items = keptNodes{sent: sent, seen: sets.New[string](), inNodes: true}
	return r
}

// kept is the list of nodes the reply keeps: upstream reads nodeNames of
// a nodeCacheCapable extender that sent them, nodes otherwise.
func (r *filterReply) kept(nodeCacheCapable bool) *keptNodes {
	if nodeCacheCapable && r.NodeNames.present {
		return &r.NodeNames
	}
	return &r.Nodes.Items
}

// keptNodes are the nodes a filter reply keeps, as the scheduler's own
// NodeInfos rather than rebuilt from what the extender echoes back, so
// that scoring still sees each node's pods. Each must have been sent, and
// named once.
type keptNodes struct {
	sent    map[string]*framework.NodeInfo
	seen    sets.Set[string]
	inNodes bool // elements are nodes, not names
	present bool // not null: an empty list keeps no node
	nodes   []*framework.NodeInfo
}

func (k *keptNodes) UnmarshalJSON(data []byte) error {
	if isNull(data) {
		return nil
	}
	k.present = true
	return eachElement(data, func(dec *json.Decoder) error {
		var name string
		if k.inNodes {
			var n struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := dec.Decode(&n); err != nil {
				return err
			}
			name = n.Metadata.Name
		} else if err := dec.Decode(&name); err != nil {
			return err
		}
		switch {
		case k.sent[name] == nil:
			return refuse("it claims a filtered node %q which is not found in the input node list", clip(name))
		case k.seen.Has(name):
			return refuse("it claims the filtered node %q twice", clip(name))
		}
		k.seen.Insert(name)
		k.nodes = append(k.nodes, k.sent[name])
		return nil
	})
}

// reasons are the reasons a filter reply gives for the nodes it refused,
// clipped. Reasons for nodes that were not sent are dropped, as upstream
// drops their scores: they would count nodes that do not exist in the
// pod's unschedulable message.
type reasons struct {
	sent   map[string]*framework.NodeInfo
	budget *reasonBudget
	m      extenderv1.FailedNodesMap
}

// reasonBudget is shared by a reply's two maps of reasons: past
// maxReasonBytes of distinct reasons, a node's reason is overflow.
type reasonBudget struct {
	seen     sets.Set[string]
	bytes    int
	overflow string
}

func (b *reasonBudget) reason(msg string) string {
	msg = clip(msg)
	if b.seen.Has(msg) {
		return msg
	}
	if b.bytes+len(msg) > maxReasonBytes {
		return b.overflow
	}
	b.seen.Insert(msg)
	b.bytes += len(msg)
	return msg
}

func (r *reasons) UnmarshalJSON(data []byte) error {
	if isNull(data) {
		return nil
	}
	return eachMember(data, func(node string, dec *json.Decoder) error {
		var msg string
		if err := dec.Decode(&msg); err != nil {
			return err
		}
		if _, repeated := r.m[node]; repeated {
			return refuse("it gives node %q a reason twice", clip(node))
		}
		if r.sent[node] != nil {
			r.m[node] = r.budget.reason(msg)
		}
		return nil
	})
}

// scores is a prioritize reply: the scores of nodes that were sent, one
// per node (upstream would add each of a node's scores).
type scores struct {
	sent sets.Set[string]
	seen sets.Set[string]
	list extenderv1.HostPriorityList
}

func (s *scores) UnmarshalJSON(data []byte) error {
	if isNull(data) {
		return nil
	}
	return eachElement(data, func(dec *json.Decoder) error {
		var hp extenderv1.HostPriority
		if err := dec.Decode(&hp); err != nil {
			return err
		}
		switch {
		case !s.sent.Has(hp.Host):
		case s.seen.Has(hp.Host):
			return refuse("it scores node %q twice", clip(hp.Host))
		default:
			s.seen.Insert(hp.Host)
			s.list = append(s.list, hp)
		}
		return nil
	})
}

// preemptReply is what the operator reads of an ExtenderPreemptionResult.
type preemptReply struct {
	NodeNameToMetaVictims chosenVictims `json:"nodeNameToMetaVictims"`
}

// chosenVictims resolves the extender's choice to pods, among the
// candidates it was sent only: each node must be one of them, and each
// victim one proposed for that node, named once. Upstream resolves any
// pod of any node in the snapshot, so a reply could have the scheduler
// delete pods the dry run never chose, of any priority and namespace. A
// node with no victims is kept with none, for the caller to refuse or
// drop.
type chosenVictims struct {
	sent   map[string]*extenderv1.Victims
	chosen map[string]*extenderv1.Victims
}

func (c *chosenVictims) UnmarshalJSON(data []byte) error {
	if isNull(data) {
		return nil
	}
	return eachMember(data, func(nodeName string, dec *json.Decoder) error {
		proposed, ok := c.sent[nodeName]
		if !ok {
			return refuse("it names node %q, which was not a candidate", clip(nodeName))
		}
		if _, repeated := c.chosen[nodeName]; repeated {
			return refuse("it names node %q twice", clip(nodeName))
		}
		mv := metaVictims{Pods: victimPods{node: nodeName, proposed: proposed.Pods, picked: []*v1.Pod{}}}
		if err := dec.Decode(&mv); err != nil {
			return err
		}
		c.chosen[nodeName] = &extenderv1.Victims{Pods: mv.Pods.picked, NumPDBViolations: mv.NumPDBViolations}
		return nil
	})
}

type metaVictims struct {
	Pods             victimPods `json:"pods"`
	NumPDBViolations int64      `json:"numPDBViolations"`
}

type victimPods struct {
	node     string
	proposed []*v1.Pod
	picked   []*v1.Pod
}

func (v *victimPods) UnmarshalJSON(data []byte) error {
	if isNull(data) {
		return nil
	}
	return eachElement(data, func(dec *json.Decoder) error {
		var mp *extenderv1.MetaPod
		if err := dec.Decode(&mp); err != nil {
			return err
		}
		uid := ""
		if mp != nil {
			uid = mp.UID
		}
		p := podByUID(v.proposed, uid)
		switch {
		case p == nil:
			return refuse("it names pod UID %q on node %q, which was not proposed as a victim there", clip(uid), v.node)
		case podByUID(v.picked, uid) != nil:
			return refuse("it names pod UID %q on node %q twice", clip(uid), v.node)
		}
		v.picked = append(v.picked, p)
		return nil
	})
}

func podByUID(pods []*v1.Pod, uid string) *v1.Pod {
	for _, p := range pods {
		if string(p.UID) == uid {
			return p
		}
	}
	return nil
}

func isNull(data []byte) bool { return bytes.Equal(data, []byte("null")) }

// eachElement calls elem to decode each element of the JSON array data
// in turn.
func eachElement(data []byte, elem func(*json.Decoder) error) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	for dec.More() {
		if err := elem(dec); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	return err
}

// eachMember calls member to decode the value of each member of the
// JSON object data in turn.
func eachMember(data []byte, member func(key string, dec *json.Decoder) error) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return errors.New("an object key is not a string")
		}
		if err := member(key, dec); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	return err
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("want %v, got %v", want, tok)
	}
	return nil
}
