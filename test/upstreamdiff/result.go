package upstreamdiff

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/dynamic-resource-allocation/structured"
)

// verdict is a framework status reduced to what both frameworks share.
type verdict struct {
	Code    string
	Plugin  string
	Reasons []string
}

// pluginScore is one Score plugin's normalized, weighted score of a node.
type pluginScore struct {
	Plugin string
	Score  int64
}

// result is what one framework decided for one pod.
type result struct {
	// PreFilter is the merged PreFilter status.
	PreFilter verdict
	// PreFilterNodes is the PreFilterResult's node set, sorted; nil when
	// PreFilter kept every node.
	PreFilterNodes []string
	// Filter is each node's Filter status (Code "Success" when it passed);
	// nodes PreFilter ruled out are absent.
	Filter map[string]verdict
	// Scores are the feasible nodes' scores per Score plugin, in the
	// framework's plugin order, and Totals their sums.
	Scores map[string][]pluginScore
	Totals map[string]int64
	// Message is the unschedulable message when no node passed.
	Message string
	// PostFilter is the PostFilter status when no node passed, Nominated
	// the node it nominated and Victims the pods it deleted, sorted.
	PostFilter verdict
	Nominated  string
	Victims    []string
	// Reserve is the Reserve status on the node the harness placed a pod
	// with ResourceClaims on, and Devices the devices then in use, sorted:
	// Reserve counts the claims' new allocations as in flight, so later
	// pods compete for what is left.
	Reserve verdict
	Devices []string
	// Signature is the pod's opportunistic-batching signature, as text.
	Signature string
	// Err is an internal error of any extension point.
	Err string
}

// nominations are the pods nominated to nodes by earlier preemptions,
// which both frameworks' Filter must count on those nodes: kube-scheduler
// keeps them in its queue's nominator.
type nominations map[string][]*v1.Pod

// side is one framework under comparison, over its own fake clientset
// and a snapshot rebuilt from the harness's cluster state.
type side interface {
	// setState replaces the snapshot with nodes and the bound pods, and
	// the nominator's content with nominated.
	setState(pods []*v1.Pod, nodes []*v1.Node, nominated nominations) error
	// cycle runs one scheduling cycle for pod over nodes, in that order.
	cycle(ctx context.Context, pod *v1.Pod, nodes []string) *result
	// reserve runs the Reserve plugins for pod on node in the state of
	// the side's last cycle, which was pod's, and returns their verdict
	// and the devices in use afterwards.
	reserve(ctx context.Context, pod *v1.Pod, node string) (verdict, []string, error)
	// bind records in the clientset that pod is now bound.
	bind(ctx context.Context, pod *v1.Pod) error
	// clientset is the side's fake clientset.
	clientset() *fake.Clientset
	// claimLister lists the ResourceClaims the side's informer holds.
	claimLister() resourcelisters.ResourceClaimLister
	// deleted returns the pods deleted through the clientset so far, in
	// the order of the calls.
	deleted() []string
	close()
}

// deletions records the pods deleted through a fake clientset: the
// victims preemption evicts, in the background on both sides.
type deletions struct {
	mu    sync.Mutex
	names []string
}

func newFakeClient(objs []k8sruntime.Object, d *deletions) *fake.Clientset {
	copies := make([]k8sruntime.Object, len(objs))
	for i, o := range objs {
		copies[i] = o.DeepCopyObject()
	}
	client := fake.NewClientset(copies...)
	client.PrependReactor("delete", "pods", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
		da := a.(clienttesting.DeleteAction)
		d.mu.Lock()
		d.names = append(d.names, da.GetNamespace()+"/"+da.GetName())
		d.mu.Unlock()
		return false, nil, nil
	})
	// The fake tracker keeps the resourceVersion a write sends, where the
	// API server bumps it: upstream's assume cache ignores an update that
	// is not newer, so PostFilter's deallocation of a claim would never
	// reach it.
	client.PrependReactor("update", "resourceclaims", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
		obj, err := meta.Accessor(a.(clienttesting.UpdateAction).GetObject())
		if err != nil {
			return true, nil, err
		}
		version, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
		if err != nil {
			return true, nil, err
		}
		obj.SetResourceVersion(strconv.FormatInt(version+1, 10))
		return false, nil, nil
	})
	return client
}

func (d *deletions) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.names)
}

// awaitClaims waits, up to 2 seconds, until each side's ResourceClaim
// informer holds the claims' status its clientset does: PostFilter's
// deallocation writes through the API, and the next cycle must read it on
// both sides alike. The handlers that count the devices in use run after
// the informer's store changed, so after a wait, or after any write to a
// claim since the last call (writes counts them), it gives them a moment:
// the store may have caught up at once while a handler has not.
func awaitClaims(ctx context.Context, writes *int, sides ...side) error {
	deadline := time.Now().Add(2 * time.Second)
	waited := false
	total := 0
	for _, s := range sides {
		total += claimWrites(s)
		for {
			synced, err := claimsSynced(ctx, s)
			if err != nil {
				return err
			}
			if synced {
				break
			}
			if time.Now().After(deadline) {
				return errors.New("ResourceClaim informer did not catch up with the API")
			}
			waited = true
			time.Sleep(5 * time.Millisecond)
		}
	}
	if waited || total != *writes {
		time.Sleep(20 * time.Millisecond)
	}
	*writes = total
	return nil
}

// claimWrites counts the writes to ResourceClaims through s's clientset.
func claimWrites(s side) int {
	n := 0
	for _, a := range s.clientset().Actions() {
		if a.GetResource().Resource == "resourceclaims" && !slices.Contains([]string{"get", "list", "watch"}, a.GetVerb()) {
			n++
		}
	}
	return n
}

func claimsSynced(ctx context.Context, s side) (bool, error) {
	list, err := s.clientset().ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, c := range list.Items {
		cached, err := s.claimLister().ResourceClaims(c.Namespace).Get(c.Name)
		if err != nil || !equality.Semantic.DeepEqual(cached.Status, c.Status) {
			return false, nil
		}
	}
	return true, nil
}

// devicesInUse lists, sorted, the devices allocated whole and the
// capacity consumed of the devices shared (their share IDs are random).
func devicesInUse(allocated *structured.AllocatedState) []string {
	var out []string
	for id := range allocated.AllocatedDevices {
		out = append(out, id.String())
	}
	for id, consumed := range allocated.AggregatedCapacity {
		for name, q := range consumed {
			out = append(out, fmt.Sprintf("%s %s=%s", id, name, q))
		}
	}
	slices.Sort(out)
	return out
}
