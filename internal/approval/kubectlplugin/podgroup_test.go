package kubectlplugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/approval"
)

func TestParsePodGroupTarget(t *testing.T) {
	for _, tc := range []struct {
		arg     string
		want    target
		wantErr string
	}{
		{arg: "podgroup/train", want: target{kind: kindPodGroup, name: "train", api: podGroupAny}},
		{arg: "PodGroups/train", want: target{kind: kindPodGroup, name: "train", api: podGroupAny}},
		{arg: "pg/train", want: target{kind: kindPodGroup, name: "train", api: podGroupCoscheduling}},
		{arg: "pgs/train", want: target{kind: kindPodGroup, name: "train", api: podGroupCoscheduling}},
		{arg: "podgroup.scheduling.x-k8s.io/train", want: target{kind: kindPodGroup, name: "train", api: podGroupCoscheduling}},
		{arg: "podgroups.v1alpha1.scheduling.x-k8s.io/train", want: target{kind: kindPodGroup, name: "train", api: podGroupCoscheduling}},
		{arg: "podgroup.scheduling.k8s.io/train", want: target{kind: kindPodGroup, name: "train", api: podGroupWorkload}},
		{arg: "podgroups.v1beta1.scheduling.k8s.io/train", want: target{kind: kindPodGroup, name: "train", api: podGroupWorkload}},
		{arg: "podgroup.scheduling.k8s.io/", wantErr: `"podgroup.scheduling.k8s.io/": missing name`},
		{arg: "podgroup.scheduling.example.com/train", wantErr: `"podgroup.scheduling.example.com/train": only waitingpod/NAME, pod/NAME and podgroup/NAME can be decided`},
		{arg: "workload/train", wantErr: `"workload/train": only waitingpod/NAME, pod/NAME and podgroup/NAME can be decided`},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			got, err := parseTarget(tc.arg)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(target{})); diff != "" {
				t.Errorf("target (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveKind(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	ambiguous := `podgroup/train is ambiguous in namespace batch: a PodGroup of each API has that name; name the one to decide, ` +
		`podgroup.scheduling.k8s.io/train (the Workload API's, GangScheduling) or podgroup.scheduling.x-k8s.io/train (scheduler-plugins', Coscheduling)`
	for _, tc := range []struct {
		name          string
		cos, workload *bool
		want          podGroupAPI
		wantErr       string
	}{
		{name: "both exist", cos: yes, workload: yes, wantErr: ambiguous},
		{name: "scheduler-plugins' only", cos: yes, workload: no, want: podGroupCoscheduling},
		{name: "the Workload API's only", cos: no, workload: yes, want: podGroupWorkload},
		{name: "the Workload API not served or not readable", cos: yes, want: podGroupCoscheduling},
		{name: "scheduler-plugins' not readable", workload: yes, want: podGroupWorkload},
		{name: "neither", cos: no, workload: no, want: podGroupAny},
		{name: "nothing readable", want: podGroupAny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveKind("train", "batch", tc.cos, tc.workload)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got != tc.want {
				t.Errorf("kind: want %d, got %d", tc.want, got)
			}
		})
	}
}

func TestGroupMembers(t *testing.T) {
	served := map[string]approval.ServedProfile{
		"gangs":     {Permit: []string{approval.Coscheduling, approval.ManualApproval}},
		"workloads": {Permit: []string{approval.GangScheduling, approval.ManualApproval}},
		"approvals": {Permit: []string{approval.ManualApproval}},
	}
	wp := func(name, profile, group string, labels map[string]string) schedulingv1alpha1.WaitingPod {
		return schedulingv1alpha1.WaitingPod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Status:     schedulingv1alpha1.WaitingPodStatus{PodUID: types.UID(name), Profile: profile, PodGroup: group},
		}
	}
	pod := func(name, uid, group string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)}}
		if group != "" {
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
		}
		return p
	}
	label := map[string]string{podgroupv1alpha1.PodGroupLabel: "train"}
	wps := []schedulingv1alpha1.WaitingPod{
		wp("cos-0", "gangs", "train", label),
		wp("cos-labelled", "approvals", "", label),
		wp("wl-0", "workloads", approval.WorkloadPodGroup("train"), nil),
		wp("wl-1", "workloads", approval.WorkloadPodGroup("train"), nil),
		wp("wl-unshown", "workloads", "", nil),
		wp("wl-stranger", "approvals", "", nil),
		wp("wl-replaced", "workloads", "", nil),
		wp("wl-other", "workloads", "", nil),
		wp("plain", "approvals", "", nil),
	}
	pods := map[string]*corev1.Pod{
		"wl-0":        pod("wl-0", "wl-0", "train"),
		"wl-1":        pod("wl-1", "wl-1", "train"),
		"wl-stranger": pod("wl-stranger", "wl-stranger", "train"),
		"wl-replaced": pod("wl-replaced", "new", "train"),
		"wl-unshown":  pod("wl-unshown", "wl-unshown", "train"),
		"wl-other":    pod("wl-other", "wl-other", "other"),
		"plain":       pod("plain", "plain", ""),
	}
	names := func(g groupMembers) []string {
		var out []string
		for _, m := range g.members {
			out = append(out, m.Name)
		}
		return out
	}

	cos := coschedulingMembers(wps, "train", served)
	if diff := cmp.Diff([]string{"cos-0"}, names(cos)); diff != "" {
		t.Errorf("scheduler-plugins' members (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{
		`waitingpod/cos-labelled skipped: its profile "approvals" does not run Coscheduling, so its pod's group label makes it no member; it is no member of podgroup/train`,
	}, cos.skipped); diff != "" {
		t.Errorf("scheduler-plugins' skipped (-want +got):\n%s", diff)
	}

	wl := workloadMembers(wps, pods, "train", served)
	if diff := cmp.Diff([]string{"wl-0", "wl-1"}, names(wl)); diff != "" {
		t.Errorf("the Workload API's members (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{
		`waitingpod/wl-unshown skipped: the scheduler does not show it in the group; it is no member of podgroup.scheduling.k8s.io/train`,
		`waitingpod/wl-stranger skipped: its profile "approvals" does not run GangScheduling, so its pod's spec.schedulingGroup makes it no member; it is no member of podgroup.scheduling.k8s.io/train`,
		`waitingpod/wl-replaced skipped: the scheduler does not show its pod held; it is no member of podgroup.scheduling.k8s.io/train`,
	}, wl.skipped); diff != "" {
		t.Errorf("the Workload API's skipped (-want +got):\n%s", diff)
	}
}
