package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/approval"
)

// podGroupAPI is which of the two PodGroup kinds a group target means:
// scheduler-plugins' (scheduling.x-k8s.io, Coscheduling) or the Workload
// API's (scheduling.k8s.io, GangScheduling). kubectl resolves the plain
// resource name podgroups to the built-in one when the API server serves
// it, and the short name pg to scheduler-plugins' CRD, its only holder.
type podGroupAPI int

const (
	// podGroupAny is podgroup/NAME: whichever kind of that name exists.
	podGroupAny podGroupAPI = iota
	// podGroupCoscheduling is scheduler-plugins' PodGroup.
	podGroupCoscheduling
	// podGroupWorkload is the scheduling.k8s.io/v1beta1 PodGroup.
	podGroupWorkload
)

// podGroupKinds are the names a group target may be given, as kubectl
// takes them: resource, resource.group and resource.version.group, and
// scheduler-plugins' short names, which only its CRD has.
var podGroupKinds = map[string]podGroupAPI{
	"podgroup": podGroupAny, "podgroups": podGroupAny,
	"pg": podGroupCoscheduling, "pgs": podGroupCoscheduling,
	"podgroup.scheduling.x-k8s.io": podGroupCoscheduling, "podgroups.scheduling.x-k8s.io": podGroupCoscheduling,
	"podgroup.v1alpha1.scheduling.x-k8s.io": podGroupCoscheduling, "podgroups.v1alpha1.scheduling.x-k8s.io": podGroupCoscheduling,
	"podgroup.scheduling.k8s.io": podGroupWorkload, "podgroups.scheduling.k8s.io": podGroupWorkload,
	"podgroup.v1beta1.scheduling.k8s.io": podGroupWorkload, "podgroups.v1beta1.scheduling.k8s.io": podGroupWorkload,
}

// groupVersion is the API group and version of the kind's REST path.
func (a podGroupAPI) groupVersion() string {
	if a == podGroupWorkload {
		return "scheduling.k8s.io/v1beta1"
	}
	return podgroupv1alpha1.GroupVersion.String()
}

// subject is how a group target of the kind is printed: the plain name for
// scheduler-plugins' kind, as before the Workload API had one, and the
// qualified one for the Workload API's.
func (a podGroupAPI) subject(name string) string {
	if a == podGroupWorkload {
		return "podgroup.scheduling.k8s.io/" + name
	}
	return "podgroup/" + name
}

// ambiguity refuses podgroup/NAME when both kinds have a group NAME in
// the namespace: which gang is meant is the approver's to say.
type ambiguity struct {
	name, namespace, why string
}

func (e *ambiguity) Error() string {
	return fmt.Sprintf("podgroup/%[1]s is ambiguous in namespace %[2]s: %[3]s; name the one to decide, "+
		"podgroup.scheduling.k8s.io/%[1]s (the Workload API's, GangScheduling) or podgroup.scheduling.x-k8s.io/%[1]s (scheduler-plugins', Coscheduling)",
		e.name, e.namespace, e.why)
}

// resolveKind says which kind podgroup/NAME means, from whether a PodGroup
// of each kind exists (nil when that cannot be told, e.g. the approver may
// not read it). When neither is known to exist, the members found decide:
// those of one kind only (or none) leave podGroupAny, to be decided by
// what was found.
func resolveKind(name, namespace string, coschedulingExists, workloadExists *bool) (podGroupAPI, error) {
	cos := coschedulingExists != nil && *coschedulingExists
	wl := workloadExists != nil && *workloadExists
	switch {
	case cos && wl:
		return podGroupAny, &ambiguity{name, namespace, "a PodGroup of each API has that name"}
	case cos:
		return podGroupCoscheduling, nil
	case wl:
		return podGroupWorkload, nil
	}
	return podGroupAny, nil
}

// resolve looks up which kind t means, when it was named podgroup/NAME.
func (d *decider) resolve(ctx context.Context, t target) (podGroupAPI, error) {
	if t.api != podGroupAny {
		return t.api, nil
	}
	var exists [2]*bool
	for i, api := range []podGroupAPI{podGroupCoscheduling, podGroupWorkload} {
		ok, err := d.client.podGroupExists(ctx, api, d.opts.namespace, t.name)
		switch {
		case err == nil:
			exists[i] = &ok
		case apierrors.IsForbidden(err):
			// An approver who may not read PodGroups still decides by
			// what the WaitingPods show.
		default:
			return podGroupAny, fmt.Errorf("podgroup/%s: looking up PodGroups of %s: %w", t.name, api.groupVersion(), err)
		}
	}
	return resolveKind(t.name, d.opts.namespace, exists[0], exists[1])
}

// groupMembers is what was found of one kind's group: the members to
// decide, and a warning for each WaitingPod that claims the group but is
// no member.
type groupMembers struct {
	members []*schedulingv1alpha1.WaitingPod
	skipped []string
}

// coschedulingMembers are the members of scheduler-plugins' PodGroup group
// among wps: the WaitingPods whose status names the group and whose profile
// runs Coscheduling. Only the operator writes status, and it shows a group
// only for a pod an instance running Coscheduling holds, whereas a pod's
// labels (and so its WaitingPod's) are whatever its author gave it.
func coschedulingMembers(wps []schedulingv1alpha1.WaitingPod, group string, served map[string]approval.ServedProfile) groupMembers {
	var g groupMembers
	for i := range wps {
		wp := &wps[i]
		if wp.Status.PodGroup != group && wp.Labels[podgroupv1alpha1.PodGroupLabel] != group {
			continue
		}
		if why := approval.NotMember(wp, group, served); why != "" {
			g.skipped = append(g.skipped, fmt.Sprintf("waitingpod/%s skipped: %s; it is no member of %s", wp.Name, why, podGroupCoscheduling.subject(group)))
			continue
		}
		g.members = append(g.members, wp)
	}
	return g
}

// workloadMembers are the members of the scheduling.k8s.io PodGroup group
// among wps: the WaitingPods of pods whose spec.schedulingGroup names the
// group, held by a profile that runs GangScheduling, which the operator
// shows in the group (approval.NotWorkloadMember). pods are the
// namespace's pods by name.
func workloadMembers(wps []schedulingv1alpha1.WaitingPod, pods map[string]*corev1.Pod, group string, served map[string]approval.ServedProfile) groupMembers {
	var g groupMembers
	for i := range wps {
		wp := &wps[i]
		pod := pods[wp.Name]
		if pod == nil || approval.PodGroupNameOf(pod) != group {
			continue
		}
		if why := approval.NotWorkloadMember(wp, pod, group, served); why != "" {
			g.skipped = append(g.skipped, fmt.Sprintf("waitingpod/%s skipped: %s; it is no member of %s", wp.Name, why, podGroupWorkload.subject(group)))
			continue
		}
		g.members = append(g.members, wp)
	}
	return g
}

// members finds the members of t's group of kind api; podGroupAny, when
// neither kind is known to exist, takes the kind whose members are held
// and is refused when both kinds have some.
func (d *decider) members(ctx context.Context, t target, api podGroupAPI) (podGroupAPI, groupMembers, error) {
	list, err := d.client.listWaitingPods(ctx, d.opts.namespace, labels.Everything())
	if err != nil {
		return api, groupMembers{}, fmt.Errorf("listing WaitingPods: %w", err)
	}
	served, err := d.servedProfiles(ctx)
	if err != nil {
		return api, groupMembers{}, fmt.Errorf("which profiles run %s or %s cannot be told (%v): nothing was %s",
			approval.Coscheduling, approval.GangScheduling, err, approval.Verb(d.opts.decision))
	}
	var cos, wl groupMembers
	if api != podGroupWorkload {
		cos = coschedulingMembers(list.Items, t.name, served)
	}
	if api != podGroupCoscheduling {
		podList, err := d.client.listPods(ctx, d.opts.namespace)
		if err != nil {
			return api, groupMembers{}, fmt.Errorf("listing pods, whose spec.schedulingGroup names their PodGroup: %w", err)
		}
		pods := make(map[string]*corev1.Pod, len(podList.Items))
		for i := range podList.Items {
			pods[podList.Items[i].Name] = &podList.Items[i]
		}
		wl = workloadMembers(list.Items, pods, t.name, served)
	}
	switch {
	case api == podGroupCoscheduling:
		return api, cos, nil
	case api == podGroupWorkload:
		return api, wl, nil
	case len(cos.members) > 0 && len(wl.members) > 0:
		return api, groupMembers{}, &ambiguity{t.name, d.opts.namespace, "members of a PodGroup of each API by that name are held"}
	case len(wl.members) > 0:
		return podGroupWorkload, wl, nil
	}
	// Nothing of the Workload API's kind is held: scheduler-plugins', as
	// podgroup/NAME meant before there were two.
	return podGroupCoscheduling, cos, nil
}

// decideGroup decides every member of t's PodGroup that is a WaitingPod
// now, each as decide would, and prints a summary. A WaitingPod that
// claims the group but is no member is listed as skipped, with why. Each
// member is decided from the object listed here, under its
// resourceVersion, so a WaitingPod replaced meanwhile (another pod of that
// name, maybe of another group) is refused rather than decided. It returns
// how many targets it stood for (its members, or itself when it has none)
// and the names of those not decided.
func (d *decider) decideGroup(ctx context.Context, t target) (int, []string) {
	api, err := d.resolve(ctx, t)
	var found groupMembers
	if err == nil {
		api, found, err = d.members(ctx, t, api)
	}
	subject := api.subject(t.name)
	if amb := (*ambiguity)(nil); errors.As(err, &amb) {
		fmt.Fprintf(d.stderr, "error: %v; nothing was %s\n", err, approval.Verb(d.opts.decision))
		return 1, []string{"podgroup/" + t.name}
	}
	if err != nil {
		fmt.Fprintf(d.stderr, "error: %s: %v\n", subject, err)
		return 1, []string{subject}
	}
	for _, s := range found.skipped {
		fmt.Fprintf(d.stderr, "Warning: %s and was not %s\n", s, approval.Verb(d.opts.decision))
	}
	members := found.members
	slices.SortFunc(members, func(a, b *schedulingv1alpha1.WaitingPod) int { return strings.Compare(a.Name, b.Name) })
	if len(members) == 0 {
		fmt.Fprintf(d.stderr, "error: %s has no members held at Permit in namespace %s: no WaitingPod shows that group\n", subject, d.opts.namespace)
		return 1, []string{subject}
	}
	var failed []string
	// gangs are the gang plugins still holding members approved now.
	var gangs []string
	decided, already := 0, 0
	for _, wp := range members {
		// Running the command again for members that reached Permit later
		// is how a gang is decided piecemeal: members that already have
		// this decision, for the pod held now, are reported, not failed.
		if wp.Spec.Decision == d.opts.decision && wp.Spec.PodUID == wp.Status.PodUID {
			d.report("waitingpod/"+wp.Name, "already "+approval.Verb(d.opts.decision), wp.Spec.PodUID, wp.Status.Profile, "")
			already++
			continue
		}
		decided++
		if err := d.decideMember(ctx, api, t.name, wp); err != nil {
			fmt.Fprintf(d.stderr, "error: %v\n", err)
			failed = append(failed, wp.Name)
			continue
		}
		for _, g := range d.gangsHolding(wp) {
			if !slices.Contains(gangs, g) {
				gangs = append(gangs, g)
			}
		}
	}
	summary := fmt.Sprintf("%s: %d of %d members %s", subject, decided-len(failed), decided, approval.Verb(d.opts.decision))
	if already > 0 {
		summary += fmt.Sprintf(", %d already were", already)
	}
	summary += d.dryRunSuffix()
	if len(gangs) > 0 {
		// What a new approver of a gang wants to know: the approval is
		// done, and the gang goes by itself once it is whole.
		slices.Sort(gangs)
		summary += fmt.Sprintf("; %s releases them once the group is complete", strings.Join(gangs, ", "))
	}
	fmt.Fprintln(d.stdout, summary)
	return decided, failed
}

// memberAttempts bounds how often decideMember decides a member that keeps
// changing.
const memberAttempts = 3

// decideMember decides wp, a member of group of kind api as listed. The
// operator rewrites members' status while the gang assembles (the count of
// members assigned in its message), which the optimistic lock of
// decideWaitingPod turns into conflicts; so on a conflict the member is
// read again and, if it is the same object, still holding the same pod and
// still shown in the group, decided again. Another WaitingPod of that name,
// or one no longer showing the group, is left alone.
func (d *decider) decideMember(ctx context.Context, api podGroupAPI, group string, wp *schedulingv1alpha1.WaitingPod) error {
	// How the operator shows the group on its members' status.
	shown := group
	if api == podGroupWorkload {
		shown = approval.WorkloadPodGroup(group)
	}
	err := d.decideWaitingPod(ctx, wp, false)
	var changed *changedError
	for range memberAttempts - 1 {
		if !errors.As(err, &changed) {
			break
		}
		cur, getErr := d.client.getWaitingPod(ctx, wp.Namespace, wp.Name)
		if getErr != nil || cur.UID != wp.UID || cur.Status.PodUID != wp.Status.PodUID || cur.Status.PodGroup != shown {
			break
		}
		err = d.decideWaitingPod(ctx, cur, false)
	}
	return err
}
