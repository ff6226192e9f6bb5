// Package kubectlplugin is the kubectl-approve and kubectl-reject plugins: it
// records a person's decision on WaitingPods, with the caller's identity as
// decidedBy, so that `kubectl approve waitingpod/NAME` works like
// `kubectl certificate approve`, and `kubectl approve podgroup/NAME` decides
// every held member of a gang at once.
//
// What a decision is about comes from the operator, never from what a pod's
// author wrote: the pod's UID, the profile holding it and its gang are the
// WaitingPod's status, and which profiles run ManualApproval or
// Coscheduling is their SchedulingProfile status. Every line printed for a
// pod decided names its UID, and --pod-uid refuses to decide another pod
// than the one reviewed.
package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/approval"
)

type options struct {
	decision schedulingv1alpha1.Decision
	reason   string
	all      bool
	selector string
	dryRun   string
	// undo deletes rejected WaitingPods instead of deciding (kubectl
	// reject --undo).
	undo bool
	// podUID pins the one pod named: nothing else is decided.
	podUID types.UID
	// ahead records a decision for a pod that no profile running
	// ManualApproval serves now.
	ahead     bool
	namespace string
	names     []string
}

// Kinds of target, as the user named them.
const (
	kindWaitingPod = "waitingpod"
	kindPod        = "pod"
	// kindPodGroup stands for the WaitingPods of the group's members.
	kindPodGroup = "podgroup"
)

type target struct {
	kind string // kindWaitingPod, kindPod or kindPodGroup
	name string
	// api is which PodGroup API a kindPodGroup target means.
	api podGroupAPI
}

// Main runs the plugin for decision with the command-line args (without the
// program name) and returns the exit code. As with kubectl's own commands,
// stdout carries only results, a line per pod decided, and every error and
// warning goes to stderr, so a script reading stdout sees what was done.
func Main(ctx context.Context, decision schedulingv1alpha1.Decision, args []string, stdout, stderr io.Writer) int {
	// The command is the decision in lower case: "approve", "reject".
	verb := strings.ToLower(string(decision))
	cmd := "kubectl " + verb
	flags := pflag.NewFlagSet(cmd, pflag.ContinueOnError)
	flags.SetOutput(stderr)
	o := options{decision: decision}
	flags.Usage = func() {
		undoUsage := ""
		if decision == schedulingv1alpha1.DecisionReject {
			undoUsage = fmt.Sprintf("\n  %s --undo (waitingpod/NAME | pod/NAME | NAME)... [-n NAMESPACE] [--dry-run[=client|server]]", cmd)
		}
		fmt.Fprintf(stderr, "%s a pod held at Permit.\n\nUsage:\n  %s (waitingpod/NAME | pod/NAME | NAME | podgroup/NAME)... [-n NAMESPACE] [--reason TEXT] [--dry-run[=client|server]]\n  %s (waitingpod/NAME | pod/NAME | NAME) [--pod-uid UID] [--ahead] [-n NAMESPACE] [--reason TEXT]\n  %s --all [-l SELECTOR] [-n NAMESPACE] [--reason TEXT]%s\n\n"+
			"Each pod decided is printed with its UID and the profile holding it.\n\n"+
			"podgroup/NAME %ss every member of PodGroup NAME that is a WaitingPod now, each as if\n"+
			"named alone. Two APIs have a PodGroup kind: podgroup.scheduling.x-k8s.io/NAME (also pg/NAME)\n"+
			"is scheduler-plugins' (Coscheduling; its members are the pods the operator shows in the\n"+
			"group), podgroup.scheduling.k8s.io/NAME the Workload API's (GangScheduling; its members are\n"+
			"the pods whose spec.schedulingGroup names it, held by a profile that runs GangScheduling).\n"+
			"podgroup/NAME means the one that exists, and is refused when both do. Pods that only claim\n"+
			"the group are listed as skipped. Only the members held now are decided:\n"+
			"members that reach Permit after the command are not covered; run it again for them.\n\nFlags:\n%s",
			strings.ToUpper(verb[:1])+verb[1:], cmd, cmd, cmd, undoUsage, verb, flags.FlagUsages())
	}
	flags.StringVar(&o.reason, "reason", "", "Why; shown on the pod's condition and events.")
	flags.BoolVar(&o.all, "all", false, "Decide every undecided WaitingPod in the namespace (narrowed by --selector).")
	flags.StringVarP(&o.selector, "selector", "l", "", "Label selector for --all, matched against the WaitingPods' (pods') labels.")
	flags.StringVar(&o.dryRun, "dry-run", "none", `"none", "client" (print only) or "server" (send without persisting).`)
	flags.Lookup("dry-run").NoOptDefVal = "client"
	flags.StringVar((*string)(&o.podUID), "pod-uid", "", "Decide only if the pod named has this UID (the one reviewed); refuse if it was replaced.")
	flags.BoolVar(&o.ahead, "ahead", false, "Record the decision even though no profile running ManualApproval serves the pod now (it is meant for a profile still to come).")
	if decision == schedulingv1alpha1.DecisionReject {
		// Only a rejection can be undone: an approval may have bound the
		// pod already, and a binding cannot be taken back.
		flags.BoolVar(&o.undo, "undo", false, "Undo a rejection: remove the rejected WaitingPod so the pod is scheduled again and held for a new decision.")
	}
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	flags.StringVar(&loading.ExplicitPath, "kubeconfig", "", "Path to the kubeconfig file.")
	overrides := &clientcmd.ConfigOverrides{}
	clientcmd.BindOverrideFlags(overrides, flags, clientcmd.RecommendedConfigOverrideFlags(""))
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		// pflag says nothing itself when it continues on error.
		fmt.Fprintf(stderr, "error: %v\nSee '%s --help'.\n", err, cmd)
		return 2
	}
	o.names = flags.Args()
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "error: %v\nSee '%s --help'.\n", err, cmd)
		return 2
	}

	clientConfig := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, overrides)
	ns, _, err := clientConfig.Namespace()
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	o.namespace = ns
	cfg, err := clientConfig.ClientConfig()
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	// The API server's warnings (a deprecation, an admission policy in Warn
	// mode) are the user's to read, printed as kubectl prints them; the
	// client's default would send them to a logger this command never sets.
	cfg.WarningHandler = rest.NewWarningWriter(stderr, rest.WarningWriterOptions{Deduplicate: true})
	c, err := newAPIClient(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	d := &decider{opts: o, client: c, stdout: stdout, stderr: stderr}
	if err := d.run(ctx); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	return 0
}

func (o *options) validate() error {
	switch o.dryRun {
	case "none", "client", "server":
	default:
		return fmt.Errorf(`--dry-run must be "none", "client" or "server", not %q`, o.dryRun)
	}
	if o.all && len(o.names) > 0 {
		return errors.New("give names or --all, not both")
	}
	if !o.all && o.selector != "" {
		return errors.New("--selector goes with --all")
	}
	if o.undo && o.all {
		return errors.New("--undo takes names, not --all: name each rejection to undo")
	}
	if o.undo && o.reason != "" {
		return errors.New("--reason does not go with --undo: undoing records no decision")
	}
	if o.podUID != "" && (o.all || o.undo || len(o.names) != 1) {
		return errors.New("--pod-uid pins one pod: name exactly one waitingpod/NAME or pod/NAME, without --all or --undo")
	}
	if o.ahead && (o.all || o.undo) {
		return errors.New("--ahead goes with waitingpod/NAME or pod/NAME, not --all or --undo")
	}
	if !o.all && len(o.names) == 0 {
		return errors.New("name at least one waitingpod/NAME, pod/NAME or podgroup/NAME, or use --all")
	}
	if _, err := labels.Parse(o.selector); err != nil {
		return fmt.Errorf("--selector: %w", err)
	}
	for _, n := range o.names {
		t, err := parseTarget(n)
		if err != nil {
			return err
		}
		if o.undo && t.kind == kindPodGroup {
			return fmt.Errorf("%q: --undo takes waitingpod/NAME or pod/NAME: name each rejection to undo", n)
		}
		if (o.podUID != "" || o.ahead) && t.kind == kindPodGroup {
			return fmt.Errorf("%q: --pod-uid and --ahead take waitingpod/NAME or pod/NAME: a group's members are decided as the operator holds them", n)
		}
	}
	return nil
}

func parseTarget(arg string) (target, error) {
	kind, name, found := strings.Cut(arg, "/")
	if !found {
		return target{kind: kindWaitingPod, name: arg}, nil
	}
	switch strings.ToLower(kind) {
	case "waitingpod", "waitingpods", "wp", "waitingpod.scheduling.schedprofiles.io", "waitingpods.scheduling.schedprofiles.io":
		kind = kindWaitingPod
	case "pod", "pods", "po":
		kind = kindPod
	default:
		api, ok := podGroupKinds[strings.ToLower(kind)]
		if !ok {
			return target{}, fmt.Errorf("%q: only waitingpod/NAME, pod/NAME and podgroup/NAME can be decided", arg)
		}
		if name == "" {
			return target{}, fmt.Errorf("%q: missing name", arg)
		}
		return target{kind: kindPodGroup, name: name, api: api}, nil
	}
	if name == "" {
		return target{}, fmt.Errorf("%q: missing name", arg)
	}
	return target{kind: kind, name: name}, nil
}

type decider struct {
	opts   options
	client *apiClient
	stdout io.Writer
	stderr io.Writer
	user   string
	// served is what the SchedulingProfiles' status says, read once per
	// run when first needed.
	served map[string]approval.ServedProfile
}

// servedProfiles reads which profiles serve pods now and what runs at their
// Permit (approval.ServedProfiles).
func (d *decider) servedProfiles(ctx context.Context) (map[string]approval.ServedProfile, error) {
	if d.served != nil {
		return d.served, nil
	}
	list, err := d.client.listProfiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing SchedulingProfiles: %w", err)
	}
	d.served = approval.ServedProfiles(list.Items)
	return d.served, nil
}

// checkManualApproval refuses, unless --ahead says it is meant, a decision
// for pod that is not held by ManualApproval now and that no profile
// running ManualApproval serves: recorded, it would release nothing.
func (d *decider) checkManualApproval(ctx context.Context, pod *corev1.Pod) error {
	if d.opts.ahead {
		return nil
	}
	name := pod.Spec.SchedulerName
	if name == "" {
		name = corev1.DefaultSchedulerName
	}
	served, err := d.servedProfiles(ctx)
	if err != nil {
		return fmt.Errorf("pod %s/%s is not held by %s now, and whether its profile %q runs it cannot be told (%v): nothing was %s; pass --ahead to record the decision anyway",
			pod.Namespace, pod.Name, approval.ManualApproval, name, err, approval.Verb(d.opts.decision))
	}
	sp, ok := served[name]
	switch {
	case !ok:
		return fmt.Errorf("pod %s/%s is for scheduler %q, which no SchedulingProfile serves: %s never holds it, so nothing was %s; pass --ahead if the decision is meant for a profile still to come",
			pod.Namespace, pod.Name, name, approval.ManualApproval, approval.Verb(d.opts.decision))
	case !slices.Contains(sp.Permit, approval.ManualApproval):
		return fmt.Errorf("pod %s/%s is scheduled by profile %q, which does not run %s at Permit: a decision would release nothing, so nothing was %s; pass --ahead if %s is still to be added",
			pod.Namespace, pod.Name, name, approval.ManualApproval, approval.Verb(d.opts.decision), approval.ManualApproval)
	}
	return nil
}

func (d *decider) run(ctx context.Context) error {
	if d.opts.undo {
		return d.runUndo(ctx)
	}
	user, err := d.client.whoAmI(ctx)
	if err != nil {
		return fmt.Errorf("finding out who you are (SelfSubjectReview): %w", err)
	}
	d.user = user

	targets, err := d.targets(ctx)
	if err != nil {
		return err
	}
	// Each member of a group counts as if named alone; a group without
	// members counts as one target that failed.
	var failed []string
	total := 0
	for _, t := range targets {
		if t.kind == kindPodGroup {
			n, groupFailed := d.decideGroup(ctx, t)
			total += n
			failed = append(failed, groupFailed...)
			continue
		}
		total++
		if err := d.decide(ctx, t); err != nil {
			fmt.Fprintf(d.stderr, "error: %v\n", err)
			failed = append(failed, t.name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d not %s: %s", len(failed), total, approval.Verb(d.opts.decision), strings.Join(failed, ", "))
	}
	return nil
}

func (d *decider) targets(ctx context.Context) ([]target, error) {
	if !d.opts.all {
		out := make([]target, 0, len(d.opts.names))
		for _, n := range d.opts.names {
			t, _ := parseTarget(n) // validated already
			out = append(out, t)
		}
		return out, nil
	}
	sel, _ := labels.Parse(d.opts.selector) // validated already
	list, err := d.client.listWaitingPods(ctx, d.opts.namespace, sel)
	if err != nil {
		return nil, err
	}
	var out []target
	for _, wp := range list.Items {
		if wp.Spec.Decision != "" {
			continue
		}
		if others, held := approval.HeldByOthersOnly(&wp); held {
			// --all means every pod a decision can release: say which were
			// left alone rather than fail the whole run for them.
			fmt.Fprintf(d.stderr, "Warning: waitingpod/%s skipped: it is held by %s, not %s, and a decision does not release it\n",
				wp.Name, strings.Join(others, ", "), approval.ManualApproval)
			continue
		}
		out = append(out, target{kind: kindWaitingPod, name: wp.Name})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no undecided WaitingPods held by %s in namespace %s", approval.ManualApproval, d.opts.namespace)
	}
	return out, nil
}

// runUndo undoes the rejection of each named WaitingPod.
func (d *decider) runUndo(ctx context.Context) error {
	targets, err := d.targets(ctx)
	if err != nil {
		return err
	}
	var failed []string
	for _, t := range targets {
		if err := d.undo(ctx, t); err != nil {
			fmt.Fprintf(d.stderr, "error: %v\n", err)
			failed = append(failed, t.name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d rejections not undone: %s", len(failed), len(targets), strings.Join(failed, ", "))
	}
	return nil
}

// undo removes the rejected WaitingPod t. A decision cannot change, so
// removing the record is how a rejection is taken back: with no decision
// left, the operator retries the pod at once and ManualApproval holds it
// again under a new WaitingPod, for a new decision. The delete is
// conditional on the UID read here, so it removes only the rejection this
// command saw: if someone undid it and the pod was held and decided anew in
// the meantime, that newer WaitingPod is left alone.
func (d *decider) undo(ctx context.Context, t target) error {
	wp, err := d.client.getWaitingPod(ctx, d.opts.namespace, t.name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("waitingpod %s/%s not found: there is no rejection to undo", d.opts.namespace, t.name)
		}
		return err
	}
	switch wp.Spec.Decision {
	case schedulingv1alpha1.DecisionReject:
	case "":
		return fmt.Errorf("waitingpod %s/%s is not decided: there is no rejection to undo", wp.Namespace, wp.Name)
	default:
		return fmt.Errorf("waitingpod %s/%s was %s, not rejected: only a rejection can be undone", wp.Namespace, wp.Name, approval.Verb(wp.Spec.Decision))
	}
	if meta.IsStatusConditionTrue(wp.Status.Conditions, schedulingv1alpha1.WaitingPodWaiting) &&
		!meta.IsStatusConditionTrue(wp.Status.Conditions, schedulingv1alpha1.WaitingPodRejected) {
		// Removed now, the rejection would never reach the held pod, which
		// would stay held, its node reserved, with no WaitingPod to show it.
		return fmt.Errorf("waitingpod %s/%s: the rejection has not reached the scheduler yet; run the command again in a moment", wp.Namespace, wp.Name)
	}
	by := ""
	if wp.Spec.DecidedBy != "" {
		by = " by " + wp.Spec.DecidedBy
	}
	done := fmt.Sprintf("waitingpod/%s: rejection%s undone; the pod is scheduled again for a new decision", wp.Name, by)
	if d.opts.dryRun == "client" {
		fmt.Fprintf(d.stdout, "%s (dry run)\n", done)
		return nil
	}
	if err := d.client.deleteWaitingPod(ctx, wp, d.opts.dryRun == "server"); err != nil {
		switch {
		case apierrors.IsConflict(err):
			return fmt.Errorf("waitingpod %s/%s was replaced while undoing; nothing was undone, look at it and run the command again", wp.Namespace, wp.Name)
		case apierrors.IsNotFound(err):
			return fmt.Errorf("waitingpod %s/%s was removed meanwhile; nothing was undone", wp.Namespace, wp.Name)
		}
		return err
	}
	fmt.Fprintf(d.stdout, "%s%s\n", done, d.dryRunSuffix())
	return nil
}

// decide records the decision on one WaitingPod. A pending pod that is not
// held yet gets a WaitingPod carrying the decision, which applies when the
// pod reaches Permit.
func (d *decider) decide(ctx context.Context, t target) error {
	wp, err := d.client.getWaitingPod(ctx, d.opts.namespace, t.name)
	if apierrors.IsNotFound(err) {
		return d.decideAhead(ctx, t)
	}
	if err != nil {
		return err
	}
	return d.decideWaitingPod(ctx, wp, true)
}

// changedError says a WaitingPod changed between being read and decided.
type changedError struct {
	namespace, name string
}

func (e *changedError) Error() string {
	return fmt.Sprintf("waitingpod %s/%s changed while deciding; run the command again", e.namespace, e.name)
}

// decideWaitingPod records the decision on wp as read, unless it changed
// since. alone says wp was named by itself rather than as a member of a
// group, whose summary line says what becomes of the members.
func (d *decider) decideWaitingPod(ctx context.Context, wp *schedulingv1alpha1.WaitingPod, alone bool) error {
	if wp.Spec.Decision != "" {
		return alreadyDecided(wp)
	}
	if others, held := approval.HeldByOthersOnly(wp); held {
		// Recording the decision would report a success that releases
		// nothing: only ManualApproval's hold is a person's to end.
		return fmt.Errorf("waitingpod %s/%s was not %s: it is held by %s, not %s, and a decision does not release it",
			wp.Namespace, wp.Name, approval.Verb(d.opts.decision), strings.Join(others, ", "), approval.ManualApproval)
	}
	for _, uid := range []types.UID{wp.Spec.PodUID, wp.Status.PodUID} {
		if pin := d.opts.podUID; pin != "" && uid != "" && uid != pin {
			return fmt.Errorf("waitingpod %s/%s is for pod UID %s, not %s (--pod-uid): nothing was %s", wp.Namespace, wp.Name, uid, pin, approval.Verb(d.opts.decision))
		}
	}
	orig := wp.DeepCopy()
	// Held by ManualApproval, as the operator shows (held by other plugins
	// only was refused above), the pod is the one the WaitingPod names.
	// Otherwise the decision is made ahead of a hold, for the pod of that
	// name now, which is read.
	held := meta.FindStatusCondition(wp.Status.Conditions, schedulingv1alpha1.WaitingPodDecidable) != nil
	if wp.Spec.PodUID == "" || d.opts.podUID != "" || !held {
		pod, err := d.pendingPod(ctx, wp.Name)
		if err != nil {
			return err
		}
		switch {
		case d.opts.podUID != "" && pod.UID != d.opts.podUID:
			return fmt.Errorf("pod %s/%s is now pod UID %s, not %s (--pod-uid): it was replaced, and nothing was %s", pod.Namespace, pod.Name, pod.UID, d.opts.podUID, approval.Verb(d.opts.decision))
		case wp.Spec.PodUID != "" && wp.Spec.PodUID != pod.UID:
			return fmt.Errorf("waitingpod %s/%s is for pod UID %s, but the pod of that name now is pod UID %s: nothing was %s", wp.Namespace, wp.Name, wp.Spec.PodUID, pod.UID, approval.Verb(d.opts.decision))
		case wp.Spec.PodUID == "" && wp.Status.PodUID != "" && wp.Status.PodUID != pod.UID:
			// The pod of that name now is not the one the scheduler held.
			return fmt.Errorf("waitingpod %s/%s is about an earlier pod of that name: nothing was %s", wp.Namespace, wp.Name, approval.Verb(d.opts.decision))
		}
		if !held {
			if err := d.checkManualApproval(ctx, pod); err != nil {
				return err
			}
		}
		// A decision must name its pod; the API server refuses it otherwise.
		wp.Spec.PodUID = pod.UID
	}
	d.fill(&wp.Spec)
	if held && !d.opts.ahead && wp.Status.Profile != "" {
		// Pinned to the profile holding the pod: one deleted and created
		// again under its name must not inherit the decision. A holder no
		// active profile stands for any more leaves it unpinned; the
		// operator shows such a pod held by nothing moments later.
		// An approver who may not list SchedulingProfiles still decides
		// held pods one by one, unpinned and told so.
		if _, err := d.servedProfiles(ctx); err != nil {
			fmt.Fprintf(d.stderr, "warning: waitingpod/%s: the decision is not pinned to profile %q (%v): it also applies if a profile of that name is deleted and created again\n", wp.Name, wp.Status.Profile, err)
		} else if sp, ok := d.served[wp.Status.Profile]; ok {
			wp.Spec.ProfileUID = sp.UID
		}
	}
	if d.opts.dryRun != "client" {
		// The optimistic lock turns a race with another approver into a
		// conflict instead of silently overwriting their decision.
		if err := d.client.patchWaitingPod(ctx, orig, wp, d.opts.dryRun == "server"); err != nil {
			if apierrors.IsConflict(err) {
				return &changedError{namespace: wp.Namespace, name: wp.Name}
			}
			return err
		}
	}
	note := ""
	if gangs := d.gangsHolding(wp); alone && len(gangs) > 0 {
		note = fmt.Sprintf("%s releases it once %s is complete", strings.Join(gangs, ", "), groupSubject(wp.Status.PodGroup))
	}
	d.report("waitingpod/"+wp.Name, approval.Verb(d.opts.decision), wp.Spec.PodUID, wp.Status.Profile, note)
	d.warnStillHeld(wp)
	return nil
}

// alreadyDecided is the error of a decision on wp, which has one already:
// it cannot change, but a rejection can be undone, which is worth knowing
// to whoever tries to decide it again.
func alreadyDecided(wp *schedulingv1alpha1.WaitingPod) error {
	by := ""
	if wp.Spec.DecidedBy != "" {
		by = " by " + wp.Spec.DecidedBy
	}
	if wp.Spec.Decision == schedulingv1alpha1.DecisionReject {
		return fmt.Errorf("waitingpod %s/%s was already rejected%s; a decision cannot be changed, but a rejection can be undone: "+
			"kubectl reject --undo waitingpod/%s -n %s schedules the pod again, to be held for a new decision",
			wp.Namespace, wp.Name, by, wp.Name, wp.Namespace)
	}
	return fmt.Errorf("waitingpod %s/%s was already %s%s; a decision cannot be changed, and an approval cannot be undone",
		wp.Namespace, wp.Name, approval.Verb(wp.Spec.Decision), by)
}

// gangsHolding are the gang plugins that still hold wp, as the operator
// shows, after an approval: they release it with its gang
// (approval.AfterApproval). A rejection ends the gang's hold too.
func (d *decider) gangsHolding(wp *schedulingv1alpha1.WaitingPod) []string {
	if d.opts.decision != schedulingv1alpha1.DecisionApprove {
		return nil
	}
	gangs, _ := approval.AfterApproval(approval.PendingPlugins(wp))
	return gangs
}

// groupSubject is how a WaitingPod's status.podGroup is printed: as
// podGroupAPI.subject prints the kind it names.
func groupSubject(podGroup string) string {
	switch name, ok := approval.WorkloadPodGroupName(podGroup); {
	case ok:
		return podGroupWorkload.subject(name)
	case podGroup != "":
		return podGroupCoscheduling.subject(podGroup)
	}
	return "its group"
}

// report prints the line of one pod decided: what was done to subject,
// then which pod it was for (its UID) and the profile holding it, when the
// operator shows one, so that what was decided can be checked against what
// was reviewed. note, if any, follows.
func (d *decider) report(subject, done string, uid types.UID, profile, note string) {
	details := []string{"pod UID " + string(uid)}
	if profile != "" {
		details = append(details, "profile "+profile)
	}
	switch d.opts.dryRun {
	case "client":
		details = append(details, "dry run")
	case "server":
		details = append(details, "server dry run")
	}
	if note != "" {
		note = ": " + note
	}
	fmt.Fprintf(d.stdout, "%s %s (%s)%s\n", subject, done, strings.Join(details, ", "), note)
}

// warnStillHeld tells the approver of a pod that Permit plugins other than
// a gang's hold too that it stays held: the approval succeeded, so this is
// a warning next to the result, not part of it. A gang's hold is no cause
// for one: it ends by itself once the gang is complete, which the result
// says.
func (d *decider) warnStillHeld(wp *schedulingv1alpha1.WaitingPod) {
	if d.opts.decision != schedulingv1alpha1.DecisionApprove {
		return
	}
	if _, others := approval.AfterApproval(approval.PendingPlugins(wp)); len(others) > 0 {
		fmt.Fprintf(d.stderr, "Warning: waitingpod/%s is still held by %s, which an approval does not release\n", wp.Name, strings.Join(others, ", "))
	}
}

// pendingPod is the pending pod name, for a WaitingPod that the operator
// does not show held by ManualApproval, or whose spec names no pod yet.
func (d *decider) pendingPod(ctx context.Context, name string) (*corev1.Pod, error) {
	pod, err := d.client.getPod(ctx, d.opts.namespace, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("pod %s/%s is gone; there is nothing to decide", d.opts.namespace, name)
		}
		return nil, err
	}
	if pod.Spec.NodeName != "" {
		return nil, fmt.Errorf("pod %s/%s is not waiting at Permit: it is bound to node %s", pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
	return pod, nil
}

func (d *decider) decideAhead(ctx context.Context, t target) error {
	pod, err := d.client.getPod(ctx, d.opts.namespace, t.name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%s %q not found in namespace %s (no WaitingPod and no Pod of that name)", t.kind, t.name, d.opts.namespace)
		}
		return err
	}
	switch {
	case pod.Spec.NodeName != "":
		return fmt.Errorf("pod %s/%s is not waiting at Permit: it is bound to node %s", pod.Namespace, pod.Name, pod.Spec.NodeName)
	case pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return fmt.Errorf("pod %s/%s is not waiting at Permit: it is finished or being deleted", pod.Namespace, pod.Name)
	case d.opts.podUID != "" && pod.UID != d.opts.podUID:
		return fmt.Errorf("pod %s/%s is now pod UID %s, not %s (--pod-uid): it was replaced, and nothing was %s", pod.Namespace, pod.Name, pod.UID, d.opts.podUID, approval.Verb(d.opts.decision))
	}
	if err := d.checkManualApproval(ctx, pod); err != nil {
		return err
	}
	wp := &schedulingv1alpha1.WaitingPod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace,
			Name:      pod.Name,
			Labels:    pod.Labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false),
			}},
		},
		Spec: schedulingv1alpha1.WaitingPodSpec{PodUID: pod.UID},
	}
	d.fill(&wp.Spec)
	note := "it is not held yet, the decision applies when it is"
	if d.opts.dryRun == "client" {
		d.report("pod/"+pod.Name, approval.Verb(d.opts.decision)+" ahead of Permit", pod.UID, "", note)
		return nil
	}
	if err := d.client.createWaitingPod(ctx, wp, d.opts.dryRun == "server"); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("pod %s/%s started waiting meanwhile; run the command again", pod.Namespace, pod.Name)
		}
		return err
	}
	d.report("pod/"+pod.Name, approval.Verb(d.opts.decision)+" ahead of Permit", pod.UID, "", note)
	return nil
}

func (d *decider) fill(spec *schedulingv1alpha1.WaitingPodSpec) {
	spec.Decision = d.opts.decision
	spec.Reason = d.opts.reason
	spec.DecidedBy = d.user
}

func (d *decider) dryRunSuffix() string {
	switch d.opts.dryRun {
	case "client":
		return " (dry run)"
	case "server":
		return " (server dry run)"
	}
	return ""
}
