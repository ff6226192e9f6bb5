package upstreamdiff

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
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
	// PreEnqueue is the first PreEnqueue plugin's rejection of the pod,
	// Code "Success" when all let it in.
	PreEnqueue verdict
	// PreBindPreFlight and PreBind are DynamicResources' statuses in the
	// binding cycle of a pod Reserve succeeded for, and Claims what the
	// pod's claims hold afterwards in the API (after Unreserve when
	// PreBind failed), by claim name (see claimWrites).
	PreBindPreFlight verdict
	PreBind          verdict
	Claims           map[string]string
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
	// preEnqueue runs the PreEnqueue plugins in order until one rejects
	// pod, as the queue does before it admits a pod.
	preEnqueue(ctx context.Context, pod *v1.Pod) verdict
	// preBind runs DynamicResources' PreBindPreFlight and PreBind for pod
	// on node in the state of the side's last cycle, after reserve, and
	// the Unreserve plugins when PreBind failed, as the binding cycle
	// does. VolumeBinding's PreBind is left out: it waits for a PV
	// controller the harness does not run.
	preBind(ctx context.Context, pod *v1.Pod, node string) (preFlight, preBind verdict)
	// unreserve runs the Unreserve plugins for pod on node in the state
	// of the side's last cycle.
	unreserve(ctx context.Context, pod *v1.Pod, node string)
	// devicesInUse lists what the side's DRA manager counts as in use
	// (see devicesInUse).
	devicesInUse() ([]string, error)
	// bind records in the clientset that pod is now bound.
	bind(ctx context.Context, pod *v1.Pod) error
	// clientset is the side's fake clientset.
	clientset() *fake.Clientset
	// claim returns a ResourceClaim as the side's DRA manager shows it
	// to the plugin: from the informer, or as the plugin's own last
	// write assumed it.
	claim(namespace, name string) (*resourceapi.ResourceClaim, error)
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

// newFakeClient returns a fake clientset holding objs that records
// deletions of pods in d; seen reports whether the side's DRA manager
// shows a claim.
func newFakeClient(objs []k8sruntime.Object, d *deletions, seen func(namespace, name string) bool) *fake.Clientset {
	copies := make([]k8sruntime.Object, len(objs))
	for i, o := range objs {
		copies[i] = o.DeepCopyObject()
	}
	client := fake.NewClientset(copies...)
	// The fake tracker does not make names from generateName, which the
	// claim DynamicResources creates for extended resources uses. Both
	// sides number them alike, so the same creations give the same names.
	var generated atomic.Int64
	client.PrependReactor("create", "resourceclaims", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
		obj, err := meta.Accessor(a.(clienttesting.CreateAction).GetObject())
		if err != nil {
			return true, nil, err
		}
		if obj.GetName() == "" && obj.GetGenerateName() != "" {
			obj.SetName(fmt.Sprintf("%s%05d", obj.GetGenerateName(), generated.Add(1)))
		}
		// Nor does it give a new object a resourceVersion, which the
		// update reactor below bumps.
		if obj.GetResourceVersion() == "" {
			obj.SetResourceVersion("1")
		}
		// The create returns once the side's DRA manager shows the claim,
		// as an API server's watch would deliver it soon after: the
		// plugins wait for it a second at a time (and PreBind here only a
		// few milliseconds), so informer lag would decide the outcome.
		ca := a.(clienttesting.CreateAction)
		if err := client.Tracker().Create(ca.GetResource(), ca.GetObject(), ca.GetNamespace()); err != nil {
			return true, nil, err
		}
		deadline := time.Now().Add(2 * time.Second)
		for !seen(obj.GetNamespace(), obj.GetName()) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		created, err := client.Tracker().Get(ca.GetResource(), ca.GetNamespace(), obj.GetName())
		return true, created, err
	})
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
		if claim, ok := a.(clienttesting.UpdateAction).GetObject().(*resourceapi.ResourceClaim); ok && a.GetSubresource() == "status" {
			attachDevices(&claim.Status)
		}
		return false, nil, nil
	})
	// Unreserve removes a pod from reservedFor with a strategic-merge
	// patch; the tracker would apply it without bumping the
	// resourceVersion either.
	client.PrependReactor("patch", "resourceclaims", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
		pa := a.(clienttesting.PatchAction)
		if pa.GetPatchType() != types.StrategicMergePatchType {
			return false, nil, nil
		}
		obj, err := client.Tracker().Get(pa.GetResource(), pa.GetNamespace(), pa.GetName())
		if err != nil {
			return true, nil, err
		}
		original, err := json.Marshal(obj)
		if err != nil {
			return true, nil, err
		}
		patched, err := strategicpatch.StrategicMergePatch(original, pa.GetPatch(), &resourceapi.ResourceClaim{})
		if err != nil {
			return true, nil, err
		}
		claim := &resourceapi.ResourceClaim{}
		if err := json.Unmarshal(patched, claim); err != nil {
			return true, nil, err
		}
		version, err := strconv.ParseInt(claim.ResourceVersion, 10, 64)
		if err != nil {
			return true, nil, err
		}
		claim.ResourceVersion = strconv.FormatInt(version+1, 10)
		return true, claim, client.Tracker().Update(pa.GetResource(), claim, claim.Namespace)
	})
	return client
}

// claimWrites returns what pod's claims hold in client's API, by claim
// name, as indented JSON of their finalizers and status: what the
// DynamicResources plugin (and the simulated driver, the same on both
// sides) wrote. Times PreBind sets (allocationTimestamp) read as
// conditionTime and the random IDs of shared devices' allocations as
// "share", so that only their presence is compared.
//
// The claim PreBind creates for the pod's extended resources backed by DRA
// counts as one of its claims, and the pod's extendedResourceClaimStatus,
// which names it and maps its requests to containers, is compared as well.
func claimWrites(ctx context.Context, client *fake.Clientset, pod *v1.Pod) (map[string]string, error) {
	out := map[string]string{}
	var names []string
	for _, rc := range pod.Spec.ResourceClaims {
		if name, _, err := resourceclaim.Name(pod, &rc); err == nil && name != nil {
			names = append(names, *name)
		}
	}
	current, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if ext := current.Status.ExtendedResourceClaimStatus; ext != nil {
		text, err := json.MarshalIndent(ext, "", "  ")
		if err != nil {
			return nil, err
		}
		out["pod's extendedResourceClaimStatus"] = string(text)
	}
	// Every claim made for the pod's extended resources, named in its
	// status or not: one that Unreserve failed to delete shows too.
	all, err := client.ResourceV1().ResourceClaims(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, c := range all.Items {
		if owner := metav1.GetControllerOfNoCopy(&c); c.Annotations[resourceapi.ExtendedResourceClaimAnnotation] == "true" && owner != nil && owner.UID == pod.UID {
			names = append(names, c.Name)
		}
	}
	for _, name := range names {
		claim, err := client.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		status := claim.Status.DeepCopy()
		if a := status.Allocation; a != nil {
			if a.AllocationTimestamp != nil {
				a.AllocationTimestamp = &conditionTime
			}
			for i := range a.Devices.Results {
				if a.Devices.Results[i].ShareID != nil {
					a.Devices.Results[i].ShareID = ptr.To(types.UID("share"))
				}
			}
		}
		for i := range status.Devices {
			if status.Devices[i].ShareID != nil {
				status.Devices[i].ShareID = ptr.To("share")
			}
		}
		text, err := json.MarshalIndent(struct {
			Finalizers []string                         `json:"finalizers"`
			Status     *resourceapi.ResourceClaimStatus `json:"status"`
		}{claim.Finalizers, status}, "", "  ")
		if err != nil {
			return nil, err
		}
		out[claim.Name] = string(text)
	}
	return out, nil
}

func (d *deletions) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.names)
}

// awaitClaims waits, up to 2 seconds, until each side's DRA manager
// shows the claims' status its clientset holds and counts their devices
// as in use (claimsSynced): PostFilter's deallocation, PreBind's
// allocation and Unreserve's release write through the API, and the next
// cycle must read them on both sides alike. Waiting for the informer is
// not enough (a write PreBind assumed stays until the informer brings a
// newer one), nor for the claims' status: the handlers that count the
// devices in use run after the manager's view changed.
func awaitClaims(ctx context.Context, sides ...side) error {
	deadline := time.Now().Add(2 * time.Second)
	for i, s := range sides {
		for {
			synced, err := claimsSynced(ctx, s)
			if err != nil {
				return err
			}
			if synced {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the DRA manager of side %d did not catch up with the API: %s", i, claimsLag(ctx, s))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// claimsSynced reports whether s's DRA manager shows the claims' status
// the API holds and counts as in use exactly the devices their
// allocations hold, with none in flight.
func claimsSynced(ctx context.Context, s side) (bool, error) {
	list, err := s.clientset().ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, c := range list.Items {
		cached, err := s.claim(c.Namespace, c.Name)
		if err != nil || !equality.Semantic.DeepEqual(cached.Status, c.Status) {
			return false, nil
		}
	}
	counted, err := s.devicesInUse()
	if err != nil {
		// A concurrent change: not synced yet.
		return false, nil
	}
	return slices.Equal(counted, allocatedInAPI(list.Items)), nil
}

// allocatedInAPI is devicesInUse of the devices claims' allocations hold,
// as both DRA managers count them: a device allocated with admin access
// is not in use, a share of a device with consumable capacity consumes
// capacity.
// claimsLag says how s's DRA manager differs from its API when
// claimsSynced stays false.
func claimsLag(ctx context.Context, s side) string {
	list, err := s.clientset().ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, c := range list.Items {
		cached, err := s.claim(c.Namespace, c.Name)
		if err != nil {
			return err.Error()
		}
		if diff := cmp.Diff(c.Status, cached.Status); diff != "" {
			return fmt.Sprintf("claim %s/%s (-API +manager):\n%s", c.Namespace, c.Name, diff)
		}
	}
	counted, err := s.devicesInUse()
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("devices in use (-API +manager):\n%s", cmp.Diff(allocatedInAPI(list.Items), counted))
}

func allocatedInAPI(claims []resourceapi.ResourceClaim) []string {
	state := &structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if r.ShareID == nil {
				state.AllocatedDevices.Insert(id)
				continue
			}
			state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			if r.ConsumedCapacity != nil {
				state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
		}
	}
	return devicesInUse(state)
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
