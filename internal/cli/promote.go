package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
)

const promoteUsage = `Usage: profile-scheduler promote [flags] SHADOW

Makes the SchedulingProfile that serves SHADOW's spec.shadowOf have exactly
SHADOW's spec (without shadowOf, keeping its own schedulerName), whoever
wrote it before, then waits until it serves that spec. It refuses while
SHADOW's status has not evaluated its current generation. A GitOps tool
reverts the change unless git holds the same spec: commit the manifest
-o yaml prints, and delete the shadow there.

Flags:
`

// promoteFieldManager is the field manager of the live profile's update.
const promoteFieldManager = "profile-scheduler-promote"

// Promote runs `profile-scheduler promote` against the cluster of the
// kubeconfig (KUBECONFIG, or --kubeconfig) and returns its exit code.
func Promote(ctx context.Context, args []string, s Streams) int {
	fs := newFlagSet("promote", promoteUsage, s)
	kubeconfig := fs.String("kubeconfig", "", "Path to the kubeconfig; empty means kubectl's rules (KUBECONFIG, then ~/.kube/config).")
	timeout := fs.Duration("timeout", 2*time.Minute, "How long to wait for the live profile to serve the promoted spec.")
	dryRun := fs.Bool("dry-run", false, "Print the live profile's manifest as it would be, and change nothing.")
	output := fs.String("o", "", `"yaml": print the promoted live profile's manifest (spec only, for git) instead of a summary.`)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return ExitUsage
	}
	if fs.NArg() != 1 || (*output != "" && *output != "yaml") {
		fs.Usage()
		return ExitUsage
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		_, _ = fmt.Fprintf(s.Err, "promote: %v\n", err)
		return ExitUsage
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		_, _ = fmt.Fprintf(s.Err, "promote: %v\n", err)
		return ExitUsage
	}
	if err := schedulingv1alpha1.AddToScheme(scheme); err != nil {
		_, _ = fmt.Fprintf(s.Err, "promote: %v\n", err)
		return ExitUsage
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_, _ = fmt.Fprintf(s.Err, "promote: %v\n", err)
		return ExitUsage
	}
	p := promotion{client: c, timeout: *timeout, dryRun: *dryRun, yaml: *output == "yaml", out: s}
	if err := p.run(ctx, fs.Arg(0)); err != nil {
		_, _ = fmt.Fprintf(s.Err, "promote: %v\n", err)
		return ExitRefused
	}
	return 0
}

// promotion moves a shadow's spec into the live profile.
type promotion struct {
	client  client.Client
	timeout time.Duration
	dryRun  bool
	yaml    bool
	out     Streams
}

func (p promotion) run(ctx context.Context, shadowName string) error {
	shadow := &schedulingv1alpha1.SchedulingProfile{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: shadowName}, shadow); err != nil {
		return err
	}
	if shadow.Spec.ShadowOf == nil {
		return fmt.Errorf("SchedulingProfile %s is not a shadow: it has no spec.shadowOf", shadowName)
	}
	of := *shadow.Spec.ShadowOf
	hash := profilebuild.SpecHash(&shadow.Spec)
	st := shadow.Status.Shadow
	switch {
	case st == nil || st.Generation != shadow.Generation || st.SpecHash != hash:
		return fmt.Errorf("shadow %s has not evaluated its current generation %d (spec hash %s) yet: its status.shadow is for %s; wait until it is, or read its Accepted condition for why not",
			shadowName, shadow.Generation, hash, evaluatedOf(st))
	case st.Evaluated == 0:
		return fmt.Errorf("shadow %s has evaluated no placement of schedulerName %s yet: nothing says how its spec would do", shadowName, of)
	}
	live, err := p.liveProfile(ctx, of)
	if err != nil {
		return err
	}
	next := live.DeepCopy()
	p.promote(next, shadow)
	if p.dryRun {
		return p.print(next, nil)
	}
	// A full update, not an apply: an apply (client-side or server-side,
	// even forced) leaves the fields other managers own and it does not
	// name, such as a weight set with kubectl patch, and the live profile
	// would serve a spec the shadow never evaluated. An update replaces
	// the whole spec; its resourceVersion precondition makes sure nothing
	// written meanwhile (a label, an annotation) is lost, and a conflict
	// reads the profile again.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := p.client.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil {
			return err
		}
		if live.Spec.ShadowOf != nil || profilebuild.SchedulerName(live) != of {
			return fmt.Errorf("SchedulingProfile %s no longer serves schedulerName %s", live.Name, of)
		}
		next = live.DeepCopy()
		p.promote(next, shadow)
		return p.client.Update(ctx, next, client.FieldOwner(promoteFieldManager))
	})
	if err != nil {
		return fmt.Errorf("updating SchedulingProfile %s: %w", live.Name, err)
	}
	served, err := p.waitServing(ctx, next.Name, next.Generation, hash)
	if err != nil {
		return err
	}
	return p.print(served, shadow)
}

// promote gives live shadow's spec, without shadowOf, keeping live's
// schedulerName.
func (p promotion) promote(live, shadow *schedulingv1alpha1.SchedulingProfile) {
	name := live.Spec.SchedulerName
	live.Spec = *shadow.Spec.DeepCopy()
	live.Spec.ShadowOf, live.Spec.SchedulerName = nil, name
}

// liveProfile finds the profile that serves schedulerName of: the one
// whose status says so and that is not a shadow.
func (p promotion) liveProfile(ctx context.Context, of string) (*schedulingv1alpha1.SchedulingProfile, error) {
	var list schedulingv1alpha1.SchedulingProfileList
	if err := p.client.List(ctx, &list); err != nil {
		return nil, err
	}
	for i := range list.Items {
		sp := &list.Items[i]
		if sp.Spec.ShadowOf == nil && sp.DeletionTimestamp.IsZero() && sp.Status.SchedulerName == of &&
			meta.IsStatusConditionTrue(sp.Status.Conditions, schedulingv1alpha1.ProfileActive) {
			return sp, nil
		}
	}
	return nil, fmt.Errorf("no SchedulingProfile serves schedulerName %s: promote a shadow of another scheduler by removing its spec.shadowOf (docs/gitops.md)", of)
}

// waitServing waits until profile name's status says generation serves
// the spec of hash, or that it cannot.
func (p promotion) waitServing(ctx context.Context, name string, generation int64, hash string) (*schedulingv1alpha1.SchedulingProfile, error) {
	sp := &schedulingv1alpha1.SchedulingProfile{}
	var refused string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, p.timeout, true, func(ctx context.Context) (bool, error) {
		if err := p.client.Get(ctx, client.ObjectKey{Name: name}, sp); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if sp.Status.ObservedGeneration < generation {
			return false, nil
		}
		if c := meta.FindStatusCondition(sp.Status.Conditions, schedulingv1alpha1.ProfileStalled); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration >= generation {
			refused = c.Message
			return true, nil
		}
		return sp.Status.ServingGeneration >= generation && sp.Status.ServingSpecHash == hash, nil
	})
	switch {
	case refused != "":
		return nil, fmt.Errorf("SchedulingProfile %s was updated to generation %d but does not serve it: %s", name, generation, refused)
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("SchedulingProfile %s was updated to generation %d, but its status did not say it serves spec hash %s within %s: %w", name, generation, hash, p.timeout, err)
	}
	return sp, nil
}

// print says what was done, or with -o yaml prints the live profile's
// manifest for git: its spec, without status or server-set metadata.
func (p promotion) print(live, shadow *schedulingv1alpha1.SchedulingProfile) error {
	if p.yaml || shadow == nil {
		manifest := &schedulingv1alpha1.SchedulingProfile{
			TypeMeta:   metav1.TypeMeta{APIVersion: schedulingv1alpha1.GroupVersion.String(), Kind: "SchedulingProfile"},
			ObjectMeta: metav1.ObjectMeta{Name: live.Name, Labels: live.Labels},
			Spec:       live.Spec,
		}
		data, err := yaml.Marshal(manifest)
		if err != nil {
			return err
		}
		// Neither status nor a null creationTimestamp belongs in git.
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err != nil {
			return err
		}
		delete(obj, "status")
		if md, ok := obj["metadata"].(map[string]any); ok {
			delete(md, "creationTimestamp")
		}
		if data, err = yaml.Marshal(obj); err != nil {
			return err
		}
		_, err = p.out.Out.Write(data)
		return err
	}
	_, err := fmt.Fprintf(p.out.Out, "SchedulingProfile %s serves generation %d, spec hash %s: the spec shadow %s evaluated at generation %d (%d placements, %d on the same node).\nCommit it to git if a GitOps tool applies %s (promote -o yaml prints it), and delete the shadow: kubectl delete schedulingprofile %s\n",
		live.Name, live.Status.ServingGeneration, live.Status.ServingSpecHash, shadow.Name, shadow.Status.Shadow.Generation,
		shadow.Status.Shadow.Evaluated, shadow.Status.Shadow.SameNode, live.Name, shadow.Name)
	return err
}

func evaluatedOf(st *schedulingv1alpha1.ShadowStatus) string {
	if st == nil {
		return "no generation"
	}
	return fmt.Sprintf("generation %d (spec hash %s)", st.Generation, st.SpecHash)
}
