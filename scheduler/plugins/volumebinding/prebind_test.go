package volumebinding

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-helpers/storage/volume"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// newRunningEnv is newEnv with the objects in the fake API server only and
// the informers started, as the scheduler runs them.
func newRunningEnv(t *testing.T, snapshot framework.SharedLister, args *configv1.VolumeBindingArgs, objs ...k8sruntime.Object) *env {
	t.Helper()
	client := fake.NewClientset(objs...)
	bumpResourceVersions(client)
	watching := watchStarts(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	fwk := st.NewFramework(t, registry(t), profile(args), snapshot,
		runtime.WithClientSet(client), runtime.WithInformerFactory(factory))
	ctx, cancel := context.WithCancel(t.Context())
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	synced := factory.WaitForCacheSync(ctx.Done())
	for typ, ok := range synced {
		if !ok {
			t.Fatalf("informer of %v did not sync", typ)
		}
	}
	// The fake API server sends a watch only what happens after the watch
	// starts, and an informer starts it after its list: a change made in
	// between would never reach the informer. Tests change objects only
	// once every informer watches.
	for range synced {
		select {
		case <-watching:
		case <-time.After(wait.ForeverTestTimeout):
			t.Fatal("an informer did not start its watch")
		}
	}
	return &env{client: client, factory: factory, fwk: fwk}
}

// watchStarts reports every watch the fake API server has started, once
// it is started, on the returned channel.
func watchStarts(client *fake.Clientset) <-chan struct{} {
	started := make(chan struct{}, 64)
	client.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		if err != nil {
			return false, nil, err
		}
		started <- struct{}{}
		return true, w, nil
	})
	return started
}

// bumpResourceVersions makes the fake API server set a new
// resourceVersion on every create and update, as a real one does (it
// keeps them as given otherwise), which the assume cache relies on.
func bumpResourceVersions(client *fake.Clientset) {
	var rv atomic.Int64
	rv.Store(100)
	client.PrependReactor("*", "*", func(action clienttesting.Action) (bool, k8sruntime.Object, error) {
		bump := func(o k8sruntime.Object) k8sruntime.Object {
			o = o.DeepCopyObject()
			if m, err := meta.Accessor(o); err == nil {
				m.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
			}
			return o
		}
		a, ok := action.(clienttesting.CreateAction) // update actions have the same methods
		if !ok || a.GetSubresource() != "" {
			return false, nil, nil
		}
		switch a.GetVerb() {
		case "create":
			obj := bump(a.GetObject())
			return true, obj, client.Tracker().Create(a.GetResource(), obj, a.GetNamespace())
		case "update":
			obj := bump(a.GetObject())
			return true, obj, client.Tracker().Update(a.GetResource(), obj, a.GetNamespace())
		}
		return false, nil, nil
	})
}

// pvController does what the PV controller and an external provisioner
// would for the claims of namespace default: it completes the bindings
// the scheduler wrote (PV claimRef) and provisions a volume in zone a for
// claims with a selected node. It stops with ctx.
func pvController(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	complete := func(pvc *v1.PersistentVolumeClaim, pvName string) {
		pvc = pvc.DeepCopy()
		pvc.Spec.VolumeName = pvName
		pvc.Status.Phase = v1.ClaimBound
		metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, volume.AnnBindCompleted, "yes")
		if _, err := client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
			t.Errorf("controller: %v", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
		pvs, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, pv := range pvs.Items {
			if ref := pv.Spec.ClaimRef; ref != nil && ref.UID != "" {
				pvc, err := client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
				if err == nil && !fullyBound(pvc) {
					complete(pvc, pv.Name)
				}
			}
		}
		pvcs, err := client.CoreV1().PersistentVolumeClaims("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for i := range pvcs.Items {
			pvc := &pvcs.Items[i]
			if _, ok := pvc.Annotations[volume.AnnSelectedNode]; !ok || pvc.Spec.VolumeName != "" {
				continue
			}
			pv := st.MakePV("pvc-"+pvc.Name).Capacity("1Gi").NodeAffinityIn(zoneKey, "a").ClaimRef(pvc.Namespace, pvc.Name, string(pvc.UID)).Phase(v1.VolumeBound).Obj()
			if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
				t.Errorf("controller: %v", err)
			}
			complete(pvc, pv.Name)
		}
	}
}

func bindingObjects(pod *v1.Pod) []k8sruntime.Object {
	return []k8sruntime.Object{
		st.MakeNode().Name("n1").Label(zoneKey, "a").Obj(),
		pod,
		st.MakeStorageClass("local").WaitForFirstConsumer().Obj(),
		st.MakeStorageClass("anywhere").WaitForFirstConsumer().Provisioner(provisioner).Obj(),
		st.MakePV("pv1").StorageClass("local").Capacity("1Gi").NodeAffinityIn(zoneKey, "a").Obj(),
		st.MakePVC("default", "static").StorageClass("local").Request("1Gi").Obj(),
		st.MakePVC("default", "dynamic").StorageClass("anywhere").Request("1Gi").Obj(),
		st.MakePVC("default", "other").StorageClass("local").Request("1Gi").Obj(),
	}
}

// schedule runs the scheduling cycle of pod on n1 up to Reserve.
func schedule(t *testing.T, e *env, snapshot *st.Snapshot, pod *v1.Pod) *framework.CycleState {
	t.Helper()
	ctx := t.Context()
	state := framework.NewCycleState()
	if _, s, _ := e.fwk.RunPreFilterPlugins(ctx, state, pod); !s.IsSuccess() {
		t.Fatalf("PreFilter: %v", s)
	}
	ni, _ := snapshot.NodeInfos().Get("n1")
	if s := e.fwk.RunFilterPlugins(ctx, state, pod, ni); !s.IsSuccess() {
		t.Fatalf("Filter: %v", s)
	}
	if s := e.fwk.RunReservePluginsReserve(ctx, state, pod, "n1"); !s.IsSuccess() {
		t.Fatalf("Reserve: %v", s)
	}
	return state
}

func TestPreBind(t *testing.T) {
	pod := st.MakePod().Name("p").PVC("static").PVC("dynamic").Node("n1").Obj()
	snapshot := st.NewSnapshot(nil, []*v1.Node{st.MakeNode().Name("n1").Label(zoneKey, "a").Obj()})
	e := newRunningEnv(t, snapshot, nil, bindingObjects(pod)...)
	ctx := t.Context()

	state := schedule(t, e, snapshot, pod)

	// Reserve assumed pv1 for this pod: another pod's cycle sees it taken,
	// without any API write so far.
	other := st.MakePod().Name("o").PVC("other").Obj()
	got := st.RunCycle(ctx, e.fwk, snapshot, other)
	want := framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonBindConflict).WithPlugin(Name)
	if diff := cmp.Diff(map[string]*framework.Status{"n1": want}, got.Filter); diff != "" {
		t.Errorf("other pod after Reserve (-want +got):\n%s", diff)
	}
	if pv, _ := e.client.CoreV1().PersistentVolumes().Get(ctx, "pv1", metav1.GetOptions{}); pv.Spec.ClaimRef != nil {
		t.Errorf("pv1 was written in the scheduling cycle: %v", pv.Spec.ClaimRef)
	}

	if s := e.fwk.RunPreBindPreFlights(ctx, state, pod, "n1"); !s.IsSuccess() {
		t.Fatalf("PreBindPreFlight: %v", s)
	}
	ctrlCtx, stop := context.WithCancel(ctx)
	defer stop()
	go pvController(ctrlCtx, t, e.client)
	if s := e.fwk.RunPreBindPlugins(ctx, state, pod, "n1"); !s.IsSuccess() {
		t.Fatalf("PreBind: %v", s)
	}
	stop()

	pv, err := e.client.CoreV1().PersistentVolumes().Get(ctx, "pv1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Name != "static" || ref.UID != "static" {
		t.Errorf("pv1 claimRef = %v, want the claim static", ref)
	}
	if pv.Annotations[volume.AnnBoundByController] != "yes" {
		t.Errorf("pv1 annotations = %v, want %s", pv.Annotations, volume.AnnBoundByController)
	}
	pvc, err := e.client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "dynamic", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pvc.Annotations[volume.AnnSelectedNode]; got != "n1" {
		t.Errorf("selected node of claim dynamic = %q, want n1", got)
	}

	// Once bound, a pod using the claims has nothing left to do in PreBind.
	state = schedule(t, e, snapshot, pod)
	if s := e.fwk.RunPreBindPreFlights(ctx, state, pod, "n1"); !s.IsSkip() {
		t.Errorf("PreBindPreFlight after binding = %v, want Skip", s)
	}
}

func TestPreBindTimeout(t *testing.T) {
	pod := st.MakePod().Name("p").PVC("static").Node("n1").Obj()
	snapshot := st.NewSnapshot(nil, []*v1.Node{st.MakeNode().Name("n1").Label(zoneKey, "a").Obj()})
	e := newRunningEnv(t, snapshot, &configv1.VolumeBindingArgs{BindTimeoutSeconds: ptr.To[int64](1)}, bindingObjects(pod)...)
	ctx := t.Context()

	state := schedule(t, e, snapshot, pod)
	start := time.Now()
	s := e.fwk.RunPreBindPlugins(ctx, state, pod, "n1")
	if !s.IsError() || !strings.Contains(s.Message(), "binding volumes: context deadline exceeded") {
		t.Errorf("PreBind = %v, want an error after the bind timeout", s)
	}
	if d := time.Since(start); d < time.Second || d > 5*time.Second {
		t.Errorf("PreBind took %v, want about bindTimeoutSeconds (1s)", d)
	}
	// The write itself happened; the PV controller never completed it.
	if pv, _ := e.client.CoreV1().PersistentVolumes().Get(ctx, "pv1", metav1.GetOptions{}); pv.Spec.ClaimRef == nil {
		t.Error("pv1 was not written")
	}
}

func TestPreBindPodDeleted(t *testing.T) {
	pod := st.MakePod().Name("p").PVC("dynamic").Node("n1").Obj()
	snapshot := st.NewSnapshot(nil, []*v1.Node{st.MakeNode().Name("n1").Label(zoneKey, "a").Obj()})
	e := newRunningEnv(t, snapshot, nil, bindingObjects(pod)...)
	ctx := t.Context()
	state := schedule(t, e, snapshot, pod)
	if err := e.client.CoreV1().Pods("default").Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s := e.fwk.RunPreBindPlugins(ctx, state, pod, "n1")
	if !s.IsError() || !strings.Contains(s.Message(), "pod does not exist any more") {
		t.Errorf("PreBind = %v, want the pod's deletion reported", s)
	}
}

func TestUnreserve(t *testing.T) {
	pod := st.MakePod().Name("p").PVC("static").PVC("dynamic").Node("n1").Obj()
	snapshot := st.NewSnapshot(nil, []*v1.Node{st.MakeNode().Name("n1").Label(zoneKey, "a").Obj()})
	e := newRunningEnv(t, snapshot, nil, bindingObjects(pod)...)
	ctx := t.Context()
	other := st.MakePod().Name("o").PVC("other").Obj()

	state := schedule(t, e, snapshot, pod)
	if got := st.RunCycle(ctx, e.fwk, snapshot, other); got.Filter["n1"].IsSuccess() {
		t.Fatal("pv1 is not assumed after Reserve")
	}
	e.fwk.RunReservePluginsUnreserve(ctx, state, pod, "n1")
	if got := st.RunCycle(ctx, e.fwk, snapshot, other); !got.Filter["n1"].IsSuccess() {
		t.Errorf("after Unreserve the other pod gets %v, want pv1 available again", got.Filter["n1"])
	}
	// Unreserve is idempotent.
	e.fwk.RunReservePluginsUnreserve(ctx, state, pod, "n1")
	e.fwk.RunReservePluginsUnreserve(ctx, framework.NewCycleState(), pod, "n1")
}

// TestUnreserveAfterFailedPreBind: when PreBind fails after writing the
// claims, Unreserve drops their assumed selected node even though the
// informer has not brought the writes yet (upstream reverts the claims it
// assumed, not the ones the API server returned), so the pod's next cycle
// is not tied to the node of the failed attempt. The informers are not
// running here: the writes reach the fake API server only.
func TestUnreserveAfterFailedPreBind(t *testing.T) {
	nodes := []*v1.Node{
		st.MakeNode().Name("n1").Label(zoneKey, "a").Obj(),
		st.MakeNode().Name("n2").Label(zoneKey, "b").Obj(),
	}
	// The pod is not in the informer: PreBind's first check fails.
	pod := st.MakePod().Name("p").PVC("dynamic").Node("n1").Obj()
	tests := []struct {
		name      string
		unreserve bool
		want      map[string]*framework.Status
	}{
		{
			name: "without Unreserve the claim stays assumed on n1",
			want: map[string]*framework.Status{"n1": nil, "n2": framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonBindConflict).WithPlugin(Name)},
		},
		{name: "Unreserve drops the assumed selected node", unreserve: true, want: map[string]*framework.Status{"n1": nil, "n2": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := st.NewSnapshot(nil, nodes)
			e := newEnv(t, snapshot, nil,
				nodes[0], nodes[1],
				st.MakeStorageClass("anywhere").WaitForFirstConsumer().Provisioner(provisioner).Obj(),
				st.MakePVC("default", "dynamic").StorageClass("anywhere").Request("1Gi").Obj(),
			)
			bumpResourceVersions(e.client)
			ctx := t.Context()
			state := schedule(t, e, snapshot, pod)
			s := e.fwk.RunPreBindPlugins(ctx, state, pod, "n1")
			if !s.IsError() || !strings.Contains(s.Message(), "pod does not exist any more") {
				t.Fatalf("PreBind = %v, want the missing pod reported", s)
			}
			if pvc, _ := e.client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "dynamic", metav1.GetOptions{}); pvc.Annotations[volume.AnnSelectedNode] != "n1" {
				t.Fatalf("claim annotations = %v, want the selected node written", pvc.Annotations)
			}
			if tt.unreserve {
				e.fwk.RunReservePluginsUnreserve(ctx, state, pod, "n1")
			}
			got := st.RunCycle(ctx, e.fwk, snapshot, pod)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			if diff := cmp.Diff(tt.want, got.Filter); diff != "" {
				t.Errorf("next cycle's Filter (-want +got):\n%s", diff)
			}
		})
	}
}
