package controllers

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/schedprofiles/profile-scheduler/internal/approval"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// ReasonWaitingForApproval is the reason of the event on a
// scheduling.k8s.io PodGroup, and on its Workload, when a member of the
// group is held at Permit for a person's decision.
const ReasonWaitingForApproval = "WaitingForApproval"

// WorkloadGroups looks scheduling.k8s.io/v1beta1 PodGroups and their
// Workloads up in the scheduler's informers (*scheduler.Scheduler does).
type WorkloadGroups interface {
	// WorkloadGroup returns the PodGroup namespace/name, nil when it is not
	// known, and the Workload its spec.workloadRef names, nil when none or
	// missing.
	WorkloadGroup(namespace, name string) (*schedulingv1beta1.PodGroup, *schedulingv1beta1.Workload)
}

// showOnWorkloadGroup tells the PodGroup of rec's pod, and the Workload
// the group names, that a member is held for approval, and the command
// that decides the gang (qualified, so that a scheduler-plugins PodGroup
// of the same name does not make it ambiguous), once per hold: the pod's
// WaitingAtPermit event is where a person looking at the pod learns it,
// this where one looking at the Workload's objects does. The message
// names the group only, so the members' events fold into one series. It
// runs off the scheduling cycle, from the mirror's queue.
func (m *WaitingPodMirror) showOnWorkloadGroup(rec *record) {
	if m.groups == nil || !rec.workloadGang || !approval.HeldByManualApproval(slices.Collect(maps.Keys(rec.deadlines))) {
		return
	}
	name, ok := framework.PodGroupNameOf(rec.pod)
	if !ok {
		return
	}
	pg, wl := m.groups.WorkloadGroup(rec.pod.Namespace, name)
	if pg == nil {
		return
	}
	decide := fmt.Sprintf("kubectl approve %s -n %s", approval.DecideGroupAs(approval.WorkloadPodGroup(pg.Name)), pg.Namespace)
	m.recorder.Eventf(pg, nil, corev1.EventTypeNormal, ReasonWaitingForApproval, "Hold",
		"Members of PodGroup %s are held at Permit by %s: decide with %s", pg.Name, approval.ManualApproval, decide)
	if wl != nil {
		m.recorder.Eventf(wl, pg, corev1.EventTypeNormal, ReasonWaitingForApproval, "Hold",
			"Members of its PodGroup %s are held at Permit by %s: decide with %s", pg.Name, approval.ManualApproval, decide)
	}
}
