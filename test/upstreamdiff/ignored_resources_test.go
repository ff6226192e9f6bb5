package upstreamdiff

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	upstreamframework "k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/profile"
	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
)

// The default profile's harness takes no extenders, so the resources an
// extender marks ignoredByScheduler are checked here on their own: the
// same profile and extenders go through kube-scheduler's New (its
// buildExtenders writes them into NodeResourcesFitArgs.ignoredResources)
// and through the profile compiler, and NodeResourcesFit's verdicts on
// pods requesting them are compared.

// ignoredExtenderURL is the extenders' URL; nothing is called there.
const ignoredExtenderURL = "http://gpu-extender.kube-system.svc:8888/scheduler"

// ignoredProfile narrows a profile to NodeResourcesFit's PreFilter and
// Filter, so that its verdicts are the only ones seen.
const ignoredProfile = `schedulerName: gpu
plugins:
  multiPoint:
    disabled:
    - name: "*"
    enabled:
    - name: PrioritySort
    - name: NodeResourcesFit
    - name: DefaultBinder
`

// ignoredExtenders are a GPU extender managing two resources, one of
// which the scheduler ignores, and an extender for another resource.
const ignoredExtenders = `- urlPrefix: ` + ignoredExtenderURL + `
  filterVerb: filter
  nodeCacheCapable: true
  managedResources:
  - name: example.com/gpu
    ignoredByScheduler: true
  - name: example.com/gpu-memory
- urlPrefix: ` + ignoredExtenderURL + `/fpga
  filterVerb: filter
  managedResources:
  - name: example.com/fpga
`

// indentYAML nests a YAML fragment n spaces deeper.
func indentYAML(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad) + "\n"
}

func TestIgnoredByScheduler(t *testing.T) {
	metrics.Register()
	fitArgs := `pluginConfig:
- name: NodeResourcesFit
  args:
    ignoredResources: [example.com/fpga]
    scoringStrategy:
      type: MostAllocated
`
	for _, tc := range []struct {
		name string
		// profile is the profile, extenders the extenders, as both
		// kube-scheduler's configuration and a SchedulingProfile write
		// them.
		profile, extenders string
		// gpuFits says whether a pod requesting example.com/gpu, which
		// the node lacks, passes kube-scheduler's Filter: the comparison
		// is of a profile that ignores it.
		gpuFits bool
		// wantError is what both say when they refuse the profile.
		wantError string
	}{
		{name: "defaulted args", profile: ignoredProfile, extenders: ignoredExtenders, gpuFits: true},
		// The extenders' ignored resources take the args' place.
		{name: "args of its own", profile: ignoredProfile + fitArgs, extenders: ignoredExtenders, gpuFits: true},
		{name: "nothing ignored", profile: ignoredProfile + fitArgs, extenders: strings.ReplaceAll(ignoredExtenders, "ignoredByScheduler: true", "ignoredByScheduler: false")},
		{
			name:      "NodeResourcesFit disabled",
			profile:   strings.Replace(ignoredProfile, "    - name: NodeResourcesFit\n", "", 1),
			extenders: ignoredExtenders,
			wantError: "can't find NodeResourcesFitArgs in plugin config",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			up, upErr := upstreamIgnoring(ctx, tc.profile, tc.extenders)
			ours, oursErr := oursIgnoring(ctx, tc.profile, tc.extenders)
			if tc.wantError != "" {
				if upErr == nil || !strings.Contains(upErr.Error(), tc.wantError) {
					t.Errorf("kube-scheduler: error %v, want one saying %q", upErr, tc.wantError)
				}
				if oursErr == nil || !strings.Contains(oursErr.Error(), tc.wantError) {
					t.Errorf("profile-scheduler: error %v, want one saying %q", oursErr, tc.wantError)
				}
				return
			}
			if upErr != nil || oursErr != nil {
				t.Fatalf("building the profile: kube-scheduler: %v; profile-scheduler: %v", upErr, oursErr)
			}
			node := &v1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "node-0"},
				Status: v1.NodeStatus{Allocatable: v1.ResourceList{
					v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110"),
				}},
			}
			for i, requests := range []v1.ResourceList{
				{"example.com/gpu": resource.MustParse("1")},
				{"example.com/gpu-memory": resource.MustParse("1")},
				{"example.com/fpga": resource.MustParse("1")},
				{"example.com/gpu": resource.MustParse("2"), v1.ResourceCPU: resource.MustParse("1")},
				{"example.com/gpu": resource.MustParse("1"), v1.ResourceCPU: resource.MustParse("8")},
			} {
				pod := &v1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pod", UID: "pod"},
					Spec: v1.PodSpec{SchedulerName: "gpu", Containers: []v1.Container{{
						Name: "c", Image: "busybox", Resources: v1.ResourceRequirements{Requests: requests, Limits: requests},
					}}},
				}
				want, got := up(ctx, pod, node), ours(ctx, pod, node)
				if fits := len(want) == 2 && want[1].Code == "Success"; i == 0 && fits != tc.gpuFits {
					t.Errorf("kube-scheduler's verdicts on a pod requesting one example.com/gpu: %+v; want it to fit: %t", want, tc.gpuFits)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("pod requesting %v: NodeResourcesFit's verdict (-kube-scheduler +profile-scheduler):\n%s", requests, diff)
				}
			}
		})
	}
}

// filterFunc runs a profile's PreFilter and Filter for pod on node.
type filterFunc func(ctx context.Context, pod *v1.Pod, node *v1.Node) []verdict

// upstreamIgnoring builds profile with extenders as kube-scheduler 1.37.2
// does from its configuration file: decoded and defaulted, then through
// New, whose buildExtenders hands the ignored resources to
// NodeResourcesFit.
func upstreamIgnoring(ctx context.Context, prof, extenders string) (filterFunc, error) {
	data := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- " +
		strings.TrimPrefix(indentYAML(prof, 2), "  ") + "extenders:\n" + extenders
	obj, _, err := schedscheme.Codecs.UniversalDecoder().Decode([]byte(data), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding the configuration: %w", err)
	}
	cfg, ok := obj.(*config.KubeSchedulerConfiguration)
	if !ok {
		return nil, fmt.Errorf("decoded a %T", obj)
	}
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	sched, err := scheduler.New(ctx, client, factory, nil, profile.NewRecorderFactory(broadcaster),
		scheduler.WithProfiles(cfg.Profiles...), scheduler.WithExtenders(cfg.Extenders...))
	if err != nil {
		return nil, err
	}
	fw := sched.Profiles["gpu"]
	return func(ctx context.Context, pod *v1.Pod, node *v1.Node) []verdict {
		state := upstreamframework.NewCycleState()
		_, st, _ := fw.RunPreFilterPlugins(ctx, state, pod)
		out := []verdict{upstreamVerdict(st)}
		if st.IsSuccess() {
			ni := upstreamframework.NewNodeInfo()
			ni.SetNode(node)
			out = append(out, upstreamVerdict(fw.RunFilterPlugins(ctx, state, pod, ni)))
		}
		return out
	}, nil
}

// oursIgnoring builds the same profile as a SchedulingProfile through the
// profile compiler, as the operator does with the extenders' URL allowed.
func oursIgnoring(ctx context.Context, prof, extenders string) (filterFunc, error) {
	sp := &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}
	if err := yaml.UnmarshalStrict([]byte(prof+"extenders:\n"+extenders), &sp.Spec); err != nil {
		return nil, fmt.Errorf("decoding the SchedulingProfile's spec: %w", err)
	}
	policy, err := extender.NewPolicy([]string{ignoredExtenderURL}, 0)
	if err != nil {
		return nil, err
	}
	planner := profilebuild.NewPlanner(profilebuild.Options{DefaultPlugins: plugins.DefaultPlugins(), ExtenderPolicy: policy, Namespace: "default"})
	plan, refusals := planner.Plan(sp)
	if len(refusals) > 0 {
		return nil, fmt.Errorf("%s", refusals.Message("SchedulingProfile gpu"))
	}
	build := profilebuild.Builder(profilebuild.Offline(plugins.NewInTreeRegistry(), fake.NewClientset()))
	fw, refusals, err := profilebuild.Compile(ctx, build, plan, nil)
	if err != nil {
		return nil, err
	}
	if len(refusals) > 0 {
		return nil, fmt.Errorf("%s", refusals.Message("SchedulingProfile gpu"))
	}
	return func(ctx context.Context, pod *v1.Pod, node *v1.Node) []verdict {
		state := framework.NewCycleState()
		_, st, _ := fw.RunPreFilterPlugins(ctx, state, pod)
		out := []verdict{oursVerdict(st)}
		if st.IsSuccess() {
			ni := framework.NewNodeInfo()
			ni.SetNode(node)
			out = append(out, oursVerdict(fw.RunFilterPlugins(ctx, state, pod, ni)))
		}
		return out
	}, nil
}
