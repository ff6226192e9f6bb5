package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	listersv1 "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultbinder"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/queuesort"
	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
	"github.com/schedprofiles/profile-scheduler/scheduler/queue"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

const testProfile = "storage-events"

// watchedResources are the informers Start must have watching before a
// test changes objects: the fake clientset drops changes made between an
// informer's list and its watch.
func watchedResources() []string {
	return []string{
		"pods", "nodes", "persistentvolumes", "persistentvolumeclaims", "storageclasses",
		"csinodes", "csidrivers", "csistoragecapacities", "volumeattachments",
	}
}

type testPlugin struct {
	name    string
	factory runtime.Factory
}

// startLoop runs a scheduler over cs serving testProfile with PrioritySort,
// DefaultBinder and plugins, and returns once every informer watches. Pods
// rejected without a matching event stay in the pool for an hour, so a
// test that sees them move saw an event move them.
func startLoop(t *testing.T, cs *fake.Clientset, plugins ...testPlugin) *Scheduler {
	t.Helper()
	return startLoopWith(t, cs, nil, plugins...)
}

// startLoopWith is startLoop with more options for New.
func startLoopWith(t *testing.T, cs *fake.Clientset, opts []Option, plugins ...testPlugin) *Scheduler {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)

	r := runtime.Registry{}
	profile := st.MultiPointProfile(configv1.Plugin{Name: queuesort.Name}, configv1.Plugin{Name: defaultbinder.Name})
	all := append([]testPlugin{{queuesort.Name, queuesort.New}, {defaultbinder.Name, defaultbinder.New}}, plugins...)
	for _, p := range all {
		if err := r.Register(p.name, p.factory, runtime.ArgsSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range plugins {
		profile.Plugins.MultiPoint.Enabled = append(profile.Plugins.MultiPoint.Enabled, configv1.Plugin{Name: p.name})
	}
	name := testProfile
	profile.SchedulerName = &name

	s, err := New(ctx, cs, r, append([]Option{
		WithDefaultPlugins(&configv1.Plugins{}),
		WithPodBackoff(10*time.Millisecond, 10*time.Millisecond),
		WithPodMaxInUnschedulablePodsDuration(time.Hour)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	fwk, err := profilebuild.Builder(s)(ctx, profile)
	if err != nil {
		t.Fatal(err)
	}
	s.Profiles().Publish(name, fwk)

	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the scheduler did not stop")
		}
		if err := fwk.Close(); err != nil {
			t.Errorf("closing the instance: %v", err)
		}
	})
	poll(t, "every informer to watch", func() bool {
		watching := map[string]bool{}
		for _, a := range cs.Actions() {
			if a.GetVerb() == "watch" {
				watching[a.GetResource().Resource] = true
			}
		}
		for _, r := range watchedResources() {
			if !watching[r] {
				return false
			}
		}
		return true
	})
	return s
}

// poll waits up to 10 s for cond; the queue moves backoff-completed pods once a second.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func waitUnschedulable(t *testing.T, s *Scheduler) {
	t.Helper()
	poll(t, "the pod to be rejected", func() bool { return s.queue.Summary() == queue.Summary{Unschedulable: 1} })
}

func pendingPod() *v1.Pod {
	return st.MakePod().Name("pending").SchedulerName(testProfile).Obj()
}

// needsPV rejects every node until its lister, built from the shared
// informer factory, shows a PersistentVolume; it registers PV Add only.
type needsPV struct {
	pvs listersv1.PersistentVolumeLister
}

const needsPVName = "NeedsPV"

func newNeedsPV(_ context.Context, _ k8sruntime.Object, h framework.Handle) (framework.Plugin, error) {
	return &needsPV{pvs: h.SharedInformerFactory().Core().V1().PersistentVolumes().Lister()}, nil
}

func (*needsPV) Name() string { return needsPVName }
func (pl *needsPV) Filter(context.Context, *framework.CycleState, *v1.Pod, *framework.NodeInfo) *framework.Status {
	pvs, err := pl.pvs.List(labels.Everything())
	if err != nil {
		return framework.AsStatus(err)
	}
	if len(pvs) == 0 {
		return framework.NewStatus(framework.Unschedulable, "no persistent volume yet")
	}
	return nil
}
func (*needsPV) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{{
		Event: framework.ClusterEvent{Resource: framework.PersistentVolume, ActionType: framework.Add},
		QueueingHintFn: func(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
			if _, ok := newObj.(*v1.PersistentVolume); !ok || oldObj != nil {
				return framework.QueueSkip, fmt.Errorf("unexpected objects %T, %T", oldObj, newObj)
			}
			return framework.Queue, nil
		},
	}}, nil
}

func boundTo(cs *fake.Clientset, pod string) string {
	for _, a := range cs.Actions() {
		if c, ok := a.(clienttesting.CreateAction); ok && c.GetSubresource() == "binding" {
			if b, ok := c.GetObject().(*v1.Binding); ok && b.Name == pod {
				return b.Target.Name
			}
		}
	}
	return ""
}

func TestPersistentVolumeAddRequeuesRejectedPod(t *testing.T) {
	cs := fake.NewClientset(st.MakeNode().Name("node-1").Obj())
	s := startLoop(t, cs, testPlugin{needsPVName, newNeedsPV})
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pendingPod(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUnschedulable(t, s)
	if got := boundTo(cs, "pending"); got != "" {
		t.Fatalf("bound to %q before any PV existed", got)
	}

	// A StorageClass is no event NeedsPV registered: the pod stays.
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc"}, Provisioner: "p"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the StorageClass in the lister", func() bool {
		_, err := s.informerFactory.Storage().V1().StorageClasses().Lister().Get("sc")
		return err == nil
	})
	if diff := cmp.Diff(queue.Summary{Unschedulable: 1}, s.queue.Summary()); diff != "" {
		t.Fatalf("after a StorageClass was added (-want +got):\n%s", diff)
	}

	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the pod to be bound after the PV was added", func() bool { return boundTo(cs, "pending") == "node-1" })
}

// customResource stands for a plugin's custom resource: ConfigMaps watched
// by an informer the scheduler does not own, passed in with WithEventSource.
const customResource framework.EventResource = "configmaps.v1.example.com"

// needsCustom rejects every node until a "custom" object exists; it
// registers customResource Add only, with no hint.
type needsCustom struct{ store cache.Store }

const needsCustomName = "NeedsCustom"

func (*needsCustom) Name() string { return needsCustomName }
func (pl *needsCustom) Filter(context.Context, *framework.CycleState, *v1.Pod, *framework.NodeInfo) *framework.Status {
	if len(pl.store.List()) == 0 {
		return framework.NewStatus(framework.Unschedulable, "no custom object yet")
	}
	return nil
}
func (*needsCustom) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{{Event: framework.ClusterEvent{Resource: customResource, ActionType: framework.Add}}}, nil
}

func TestEventSourceRequeuesRejectedPod(t *testing.T) {
	cs := fake.NewClientset(st.MakeNode().Name("node-1").Obj())
	// Not the scheduler's factory: the source belongs to its caller.
	factory := informers.NewSharedInformerFactory(cs, 0)
	custom := factory.Core().V1().ConfigMaps().Informer()
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	newNeedsCustom := func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
		return &needsCustom{store: custom.GetStore()}, nil
	}
	s := startLoopWith(t, cs, []Option{WithEventSource(customResource, custom)}, testPlugin{needsCustomName, newNeedsCustom})
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pendingPod(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUnschedulable(t, s)
	if _, err := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx, &v1.ConfigMap{ObjectMeta: objectMeta(metav1.NamespaceDefault)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The periodic flush is an hour away: only the event can move the pod.
	poll(t, "the pod to be bound after the custom object was added", func() bool { return boundTo(cs, "pending") == "node-1" })
}

// recorder rejects every pod and registers {resource, All} for each
// storage resource with a hint that records what it was given and skips.
type recorder struct {
	mu   sync.Mutex
	seen []seenEvent
}

type seenEvent struct {
	Event    string
	Old, New string
}

const recorderName = "Recorder"

// storageResources are the resources whose events the loop must deliver.
func storageResources() []framework.EventResource {
	return []framework.EventResource{
		framework.PersistentVolume, framework.PersistentVolumeClaim, framework.StorageClass, framework.CSINode,
		framework.CSIDriver, framework.CSIStorageCapacity, framework.VolumeAttachment,
		framework.ResourceClaim, framework.ResourceSlice, framework.DeviceClass,
	}
}

func (*recorder) Name() string { return recorderName }
func (*recorder) Filter(context.Context, *framework.CycleState, *v1.Pod, *framework.NodeInfo) *framework.Status {
	return framework.NewStatus(framework.Unschedulable, "recording")
}
func (r *recorder) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	var out []framework.ClusterEventWithHint
	for _, res := range storageResources() {
		evt := framework.ClusterEvent{Resource: res, ActionType: framework.All}
		out = append(out, framework.ClusterEventWithHint{Event: evt, QueueingHintFn: r.hint(res)})
	}
	return out, nil
}

// hint records under the resource's Add/Update/Delete label which of them
// it was given: the action is inferred from which objects are set.
func (r *recorder) hint(res framework.EventResource) framework.QueueingHintFn {
	return func(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
		action := framework.Update
		switch {
		case oldObj == nil:
			action = framework.Add
		case newObj == nil:
			action = framework.Delete
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.seen = append(r.seen, seenEvent{
			Event: framework.ClusterEvent{Resource: res, ActionType: action}.Label(),
			Old:   describe(oldObj), New: describe(newObj),
		})
		return framework.QueueSkip, nil
	}
}

func (r *recorder) events() []seenEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// describe names obj's Go type, name and "v" label; "" for nil.
func describe(obj any) string {
	if obj == nil {
		return ""
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return fmt.Sprintf("%T %s v=%s", obj, m.GetName(), m.GetLabels()["v"])
}

func objectMeta(namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: "obj", Namespace: namespace, Labels: map[string]string{"v": "1"}}
}

// TestStorageEventsReachQueueingHints checks that every change of the
// resources the plugins watch beside pods and nodes reaches the hints.
func TestStorageEventsReachQueueingHints(t *testing.T) {
	tests := []struct {
		resource framework.EventResource
		gvr      schema.GroupVersionResource
		obj      k8sruntime.Object
	}{
		{
			resource: framework.PersistentVolume,
			gvr:      v1.SchemeGroupVersion.WithResource("persistentvolumes"),
			obj:      &v1.PersistentVolume{ObjectMeta: objectMeta("")},
		},
		{
			resource: framework.PersistentVolumeClaim,
			gvr:      v1.SchemeGroupVersion.WithResource("persistentvolumeclaims"),
			obj:      &v1.PersistentVolumeClaim{ObjectMeta: objectMeta(metav1.NamespaceDefault)},
		},
		{
			resource: framework.StorageClass,
			gvr:      storagev1.SchemeGroupVersion.WithResource("storageclasses"),
			// Immediate binding: no Add is filtered out by binding mode.
			obj: &storagev1.StorageClass{ObjectMeta: objectMeta(""), Provisioner: "p"},
		},
		{
			resource: framework.CSINode,
			gvr:      storagev1.SchemeGroupVersion.WithResource("csinodes"),
			obj:      &storagev1.CSINode{ObjectMeta: objectMeta("")},
		},
		{
			resource: framework.CSIDriver,
			gvr:      storagev1.SchemeGroupVersion.WithResource("csidrivers"),
			obj:      &storagev1.CSIDriver{ObjectMeta: objectMeta("")},
		},
		{
			resource: framework.CSIStorageCapacity,
			gvr:      storagev1.SchemeGroupVersion.WithResource("csistoragecapacities"),
			obj: &storagev1.CSIStorageCapacity{ObjectMeta: objectMeta(metav1.NamespaceDefault), StorageClassName: "sc",
				Capacity: resource.NewQuantity(1<<30, resource.BinarySI)},
		},
		{
			resource: framework.VolumeAttachment,
			gvr:      storagev1.SchemeGroupVersion.WithResource("volumeattachments"),
			obj:      &storagev1.VolumeAttachment{ObjectMeta: objectMeta("")},
		},
		// DRA objects: claims through the claim assume cache, slices
		// through the ResourceSlice tracker, classes from their informer.
		{
			resource: framework.ResourceClaim,
			gvr:      resourceapi.SchemeGroupVersion.WithResource("resourceclaims"),
			obj:      &resourceapi.ResourceClaim{ObjectMeta: objectMeta(metav1.NamespaceDefault)},
		},
		{
			resource: framework.ResourceSlice,
			gvr:      resourceapi.SchemeGroupVersion.WithResource("resourceslices"),
			obj:      &resourceapi.ResourceSlice{ObjectMeta: objectMeta(""), Spec: resourceapi.ResourceSliceSpec{Driver: "d", NodeName: ptr.To("node-1")}},
		},
		{
			resource: framework.DeviceClass,
			gvr:      resourceapi.SchemeGroupVersion.WithResource("deviceclasses"),
			obj:      &resourceapi.DeviceClass{ObjectMeta: objectMeta("")},
		},
	}
	for _, tt := range tests {
		t.Run(string(tt.resource), func(t *testing.T) {
			cs := fake.NewClientset(st.MakeNode().Name("node-1").Obj())
			rec := &recorder{}
			s := startLoop(t, cs, testPlugin{recorderName, func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
				return rec, nil
			}})
			if _, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Create(context.Background(), pendingPod(), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitUnschedulable(t, s)

			// Each change waits for its event: the ResourceSlice tracker
			// reports a slice's latest state, so changes in quick
			// succession could be reported as one.
			ns := tt.obj.(metav1.Object).GetNamespace()
			if err := cs.Tracker().Create(tt.gvr, tt.obj, ns); err != nil {
				t.Fatal(err)
			}
			poll(t, "the add", func() bool { return len(rec.events()) >= 1 })
			updated := tt.obj.DeepCopyObject()
			updated.(metav1.Object).SetLabels(map[string]string{"v": "2"})
			if err := cs.Tracker().Update(tt.gvr, updated, ns); err != nil {
				t.Fatal(err)
			}
			poll(t, "the update", func() bool { return len(rec.events()) >= 2 })
			if err := cs.Tracker().Delete(tt.gvr, ns, "obj"); err != nil {
				t.Fatal(err)
			}
			typ := fmt.Sprintf("%T obj", tt.obj)
			want := []seenEvent{
				{Event: string(tt.resource) + "Add", New: typ + " v=1"},
				{Event: string(tt.resource) + "Update", Old: typ + " v=1", New: typ + " v=2"},
				{Event: string(tt.resource) + "Delete", Old: typ + " v=2"},
			}
			poll(t, "three events", func() bool { return len(rec.events()) >= len(want) })
			if diff := cmp.Diff(want, rec.events()); diff != "" {
				t.Errorf("events given to the hint (-want +got):\n%s", diff)
			}
			// Every hint said QueueSkip: the pod stays where it was.
			if diff := cmp.Diff(queue.Summary{Unschedulable: 1}, s.queue.Summary()); diff != "" {
				t.Errorf("queue after the events (-want +got):\n%s", diff)
			}
		})
	}
}

// A deletion the watch missed arrives as a tombstone; hints get the
// object inside it, as they would from a delete the watch saw.
func TestStorageDeleteTombstoneIsUnwrapped(t *testing.T) {
	cs := fake.NewClientset(st.MakeNode().Name("node-1").Obj())
	rec := &recorder{}
	s := startLoop(t, cs, testPlugin{recorderName, func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
		return rec, nil
	}})
	if _, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Create(context.Background(), pendingPod(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUnschedulable(t, s)

	pvc := &v1.PersistentVolumeClaim{ObjectMeta: objectMeta(metav1.NamespaceDefault)}
	s.clusterEventHandler(framework.PersistentVolumeClaim).OnDelete(cache.DeletedFinalStateUnknown{Key: "default/obj", Obj: pvc})
	want := []seenEvent{{Event: "PersistentVolumeClaimDelete", Old: "*v1.PersistentVolumeClaim obj v=1"}}
	if diff := cmp.Diff(want, rec.events()); diff != "" {
		t.Errorf("events given to the hint (-want +got):\n%s", diff)
	}
}

// The storage handlers run on informer goroutines for every change in the
// cluster, wanted or not; this measures one update with 5000 pods in the
// pool, half rejected by a plugin that registered PersistentVolume updates
// and half by one that did not.
func BenchmarkStorageEventHandler(b *testing.B) {
	logger := klog.Background()
	ctx := klog.NewContext(context.Background(), logger)
	skip := func(klog.Logger, *v1.Pod, any, any) (framework.QueueingHint, error) { return framework.QueueSkip, nil }
	r := runtime.Registry{}
	plugins := []framework.Plugin{
		&benchRejector{name: "Registered", events: []framework.ClusterEventWithHint{{
			Event: framework.ClusterEvent{Resource: framework.PersistentVolume, ActionType: framework.Update}, QueueingHintFn: skip,
		}}},
		&benchRejector{name: "Unrelated", events: []framework.ClusterEventWithHint{{
			Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add},
		}}},
	}
	profile := st.MultiPointProfile(configv1.Plugin{Name: queuesort.Name}, configv1.Plugin{Name: defaultbinder.Name})
	for _, p := range []testPlugin{{queuesort.Name, queuesort.New}, {defaultbinder.Name, defaultbinder.New}} {
		if err := r.Register(p.name, p.factory, runtime.ArgsSpec{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, p := range plugins {
		if err := r.Register(p.Name(), func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) { return p, nil }, runtime.ArgsSpec{}); err != nil {
			b.Fatal(err)
		}
		profile.Plugins.MultiPoint.Enabled = append(profile.Plugins.MultiPoint.Enabled, configv1.Plugin{Name: p.Name()})
	}
	name := testProfile
	profile.SchedulerName = &name
	s, err := New(ctx, fake.NewClientset(), r, WithDefaultPlugins(&configv1.Plugins{}), WithPodMaxInUnschedulablePodsDuration(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	fwk, err := profilebuild.Builder(s)(ctx, profile)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = fwk.Close() }()
	s.Profiles().Publish(name, fwk)

	for i := range st.BenchNodes {
		s.queue.Add(logger, st.MakePod().Name(fmt.Sprint("pod-", i)).SchedulerName(name).Obj())
	}
	for i := range st.BenchNodes {
		entity, err := s.queue.Pop(logger)
		if err != nil {
			b.Fatal(err)
		}
		pi := entity.(*framework.QueuedPodInfo)
		pi.UnschedulablePlugins.Insert(plugins[i%2].Name())
		if err := s.queue.AddUnschedulableIfNotPresent(logger, pi, s.queue.SchedulingCycle()); err != nil {
			b.Fatal(err)
		}
	}
	if diff := cmp.Diff(queue.Summary{Unschedulable: st.BenchNodes}, s.queue.Summary()); diff != "" {
		b.Fatalf("pool (-want +got):\n%s", diff)
	}
	oldPV := &v1.PersistentVolume{ObjectMeta: objectMeta("")}
	newPV := oldPV.DeepCopy()
	newPV.Labels["v"] = "2"
	oldVA := &storagev1.VolumeAttachment{ObjectMeta: objectMeta("")}
	newVA := oldVA.DeepCopy()
	newVA.Labels["v"] = "2"
	for _, bb := range []struct {
		name     string
		resource framework.EventResource
		old, new any
	}{
		// Half the pool's pods are offered to a hint.
		{"registered", framework.PersistentVolume, oldPV, newPV},
		// No served profile registered it: the queue returns at once.
		{"unregistered", framework.VolumeAttachment, oldVA, newVA},
	} {
		b.Run(bb.name, func(b *testing.B) {
			h := s.clusterEventHandler(bb.resource)
			b.ReportAllocs()
			for b.Loop() {
				h.OnUpdate(bb.old, bb.new)
			}
			b.StopTimer()
			if diff := cmp.Diff(queue.Summary{Unschedulable: st.BenchNodes}, s.queue.Summary()); diff != "" {
				b.Fatalf("pool after the events (-want +got):\n%s", diff)
			}
		})
	}
}

type benchRejector struct {
	name   string
	events []framework.ClusterEventWithHint
}

func (r *benchRejector) Name() string { return r.name }
func (r *benchRejector) Filter(context.Context, *framework.CycleState, *v1.Pod, *framework.NodeInfo) *framework.Status {
	return framework.NewStatus(framework.Unschedulable, "rejected")
}
func (r *benchRejector) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return r.events, nil
}
