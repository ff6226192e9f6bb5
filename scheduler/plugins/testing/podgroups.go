package testing

import (
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// PodGroupName puts the pod in the PodGroup name (spec.schedulingGroup).
func (p *PodWrapper) PodGroupName(name string) *PodWrapper {
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &name}
	return p
}

// PodGroupWrapper builds a scheduling.k8s.io/v1beta1 PodGroup fluently:
// st.MakePodGroup().Name("pg").MinCount(3).Obj().
type PodGroupWrapper struct{ schedulingv1beta1.PodGroup }

// MakePodGroup returns a PodGroup in namespace "default" with no policy.
func MakePodGroup() *PodGroupWrapper {
	return &PodGroupWrapper{schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault}}}
}

// Obj returns the built PodGroup.
func (w *PodGroupWrapper) Obj() *schedulingv1beta1.PodGroup { return &w.PodGroup }

// Name sets the name.
func (w *PodGroupWrapper) Name(s string) *PodGroupWrapper { w.SetName(s); return w }

// Namespace sets the namespace.
func (w *PodGroupWrapper) Namespace(s string) *PodGroupWrapper { w.SetNamespace(s); return w }

// MinCount sets a gang policy with minCount n.
func (w *PodGroupWrapper) MinCount(n int32) *PodGroupWrapper {
	w.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: n}
	return w
}

// BasicPolicy sets the basic policy.
func (w *PodGroupWrapper) BasicPolicy() *PodGroupWrapper {
	w.Spec.SchedulingPolicy.Basic = &schedulingv1beta1.BasicSchedulingPolicy{}
	return w
}

// WorkloadRef sets the Workload and its template the group comes from.
func (w *PodGroupWrapper) WorkloadRef(templateName, workloadName string) *PodGroupWrapper {
	w.Spec.WorkloadRef = &schedulingv1beta1.WorkloadReference{TemplateName: templateName, WorkloadName: workloadName}
	return w
}

// TopologyKey sets the group's topology constraint.
func (w *PodGroupWrapper) TopologyKey(key string) *PodGroupWrapper {
	w.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
		Topology: []schedulingv1beta1.TopologyConstraint{{Key: key}},
	}
	return w
}

// PodGroups is an in-memory framework.PodGroupManager for plugin tests:
// PodGroup objects and the pods that name them, each unscheduled,
// assumed or assigned, as the scheduler cache tracks them. Its errors
// read as the cache's. It is not safe for concurrent use.
type PodGroups struct {
	objects map[framework.EntityKey]*schedulingv1beta1.PodGroup
	states  map[framework.EntityKey]*podGroupPods
}

var _ framework.PodGroupManager = (*PodGroups)(nil)

// NewPodGroups returns podGroups with pods as their members: assigned
// when the pod names a node, else unscheduled. A group has a state as
// soon as a pod names it, and its object only when podGroups has it.
func NewPodGroups(podGroups []*schedulingv1beta1.PodGroup, pods []*v1.Pod) *PodGroups {
	g := &PodGroups{
		objects: make(map[framework.EntityKey]*schedulingv1beta1.PodGroup),
		states:  make(map[framework.EntityKey]*podGroupPods),
	}
	for _, pg := range podGroups {
		key := framework.PodGroupKey(pg.Namespace, pg.Name)
		g.objects[key] = pg
		g.state(key)
	}
	for _, pod := range pods {
		g.Add(pod)
	}
	return g
}

func (g *PodGroups) state(key framework.EntityKey) *podGroupPods {
	s, ok := g.states[key]
	if !ok {
		s = &podGroupPods{pods: make(map[types.UID]*v1.Pod), assumed: sets.New[types.UID]()}
		g.states[key] = s
	}
	return s
}

// Add adds pod to its group, if it has one: assigned when it names a
// node, else unscheduled.
func (g *PodGroups) Add(pod *v1.Pod) {
	name, ok := framework.PodGroupNameOf(pod)
	if !ok {
		return
	}
	g.state(framework.PodGroupKey(pod.Namespace, name)).pods[pod.UID] = pod
}

// Assume marks pod, a member added before, assumed on nodeName, as the
// cache does for a pod that passed Reserve.
func (g *PodGroups) Assume(pod *v1.Pod, nodeName string) {
	name, ok := framework.PodGroupNameOf(pod)
	if !ok {
		return
	}
	s := g.state(framework.PodGroupKey(pod.Namespace, name))
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = nodeName
	s.pods[pod.UID] = assumed
	s.assumed.Insert(pod.UID)
}

// Forget marks pod, assumed before, unscheduled again, as the cache does
// for a pod whose binding failed.
func (g *PodGroups) Forget(pod *v1.Pod) {
	name, ok := framework.PodGroupNameOf(pod)
	if !ok {
		return
	}
	s := g.state(framework.PodGroupKey(pod.Namespace, name))
	unscheduled := pod.DeepCopy()
	unscheduled.Spec.NodeName = ""
	s.pods[pod.UID] = unscheduled
	s.assumed.Delete(pod.UID)
}

// PodGroupStates returns the groups' pod states.
func (g *PodGroups) PodGroupStates() framework.PodGroupStateLister { return podGroupStateLister{g} }

// PodGroups returns the PodGroup objects.
func (g *PodGroups) PodGroups() framework.PodGroupLister { return podGroupLister{g} }

type podGroupStateLister struct{ g *PodGroups }

func (l podGroupStateLister) Get(namespace, name string) (framework.PodGroupState, error) {
	s, ok := l.g.states[framework.PodGroupKey(namespace, name)]
	if !ok {
		return nil, fmt.Errorf("pod group state not found for pod group %s/%s", namespace, name)
	}
	return s, nil
}

type podGroupLister struct{ g *PodGroups }

func (l podGroupLister) Get(namespace, name string) (*schedulingv1beta1.PodGroup, error) {
	key := framework.PodGroupKey(namespace, name)
	pg, ok := l.g.objects[key]
	if !ok {
		return nil, fmt.Errorf("pod group object not found for pod group %s", key)
	}
	return pg, nil
}

// podGroupPods is one group's pods: assumed ones are in assumed, assigned
// ones name a node and are not assumed, the others are unscheduled.
type podGroupPods struct {
	pods    map[types.UID]*v1.Pod
	assumed sets.Set[types.UID]
}

func (s *podGroupPods) AllPods() sets.Set[types.UID] { return sets.KeySet(s.pods) }

func (s *podGroupPods) AllPodsCount() int { return len(s.pods) }

func (s *podGroupPods) UnscheduledPods() map[string]*v1.Pod {
	out := make(map[string]*v1.Pod)
	for _, pod := range s.pods {
		if pod.Spec.NodeName == "" {
			out[pod.Name] = pod
		}
	}
	return out
}

func (s *podGroupPods) AssumedPods() sets.Set[types.UID] { return s.assumed.Clone() }

func (s *podGroupPods) AssignedPods() sets.Set[types.UID] {
	out := sets.New[types.UID]()
	for uid, pod := range s.pods {
		if pod.Spec.NodeName != "" && !s.assumed.Has(uid) {
			out.Insert(uid)
		}
	}
	return out
}

// ScheduledPods returns the assumed and assigned pods, by UID for a
// stable order.
func (s *podGroupPods) ScheduledPods() []*v1.Pod {
	var out []*v1.Pod
	for _, uid := range slices.Sorted(maps.Keys(s.pods)) {
		if pod := s.pods[uid]; pod.Spec.NodeName != "" {
			out = append(out, pod)
		}
	}
	return out
}

func (s *podGroupPods) ScheduledPodsCount() int { return len(s.ScheduledPods()) }
