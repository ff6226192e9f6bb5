package profilebuild_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// TestValidate checks specs offline, without a cluster, as
// `profile-scheduler validate` does: the refusals are those the controller
// reports in status.
func TestValidate(t *testing.T) {
	policy, err := extender.NewPolicy([]string{"https://allowed.example"}, extender.DefaultMaxReplyBytes)
	if err != nil {
		t.Fatal(err)
	}
	v, err := operator.OfflineChecker([]string{"default-scheduler"}, policy, runtime.WorkloadGates{}, "profile-scheduler-system")
	if err != nil {
		t.Fatal(err)
	}
	profile := func(name string, spec schedulingv1alpha1.SchedulingProfileSpec) *schedulingv1alpha1.SchedulingProfile {
		sp := &schedulingv1alpha1.SchedulingProfile{Spec: spec}
		sp.Name = name
		return sp
	}
	args := func(json string) k8sruntime.RawExtension { return k8sruntime.RawExtension{Raw: []byte(json)} }
	for _, tt := range []struct {
		name string
		sp   *schedulingv1alpha1.SchedulingProfile
		want profilebuild.Refusals
	}{
		{name: "default profile", sp: profile("gpu", schedulingv1alpha1.SchedulingProfileSpec{})},
		{
			name: "gangs and approvals",
			sp: profile("gangs", schedulingv1alpha1.SchedulingProfileSpec{
				Plugins: &schedulingv1alpha1.Plugins{
					QueueSort:  schedulingv1alpha1.PluginSet{Disabled: []schedulingv1alpha1.Plugin{{Name: "PrioritySort"}}},
					MultiPoint: schedulingv1alpha1.PluginSet{Enabled: []schedulingv1alpha1.Plugin{{Name: "Coscheduling"}, {Name: "ManualApproval"}}},
				},
				PluginConfig: []schedulingv1alpha1.PluginConfig{{Name: "ManualApproval", Args: args(`{"approvalWindow":"10m"}`)}},
			}),
		},
		{
			name: "unknown plugin",
			sp: profile("typo", schedulingv1alpha1.SchedulingProfileSpec{
				Plugins: &schedulingv1alpha1.Plugins{Filter: schedulingv1alpha1.PluginSet{Enabled: []schedulingv1alpha1.Plugin{{Name: "NodeResourcesFits"}}}},
			}),
			want: profilebuild.Refusals{{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.plugins.filter.enabled[0]", Detail: `Filter plugin "NodeResourcesFits": no such plugin is registered`}},
		},
		{
			name: "unknown args field",
			sp: profile("args", schedulingv1alpha1.SchedulingProfileSpec{
				PluginConfig: []schedulingv1alpha1.PluginConfig{{Name: "NodeResourcesFit", Args: args(`{"scoringStrategy":{"type":"MostAllocated"},"ignoredResource":["x"]}`)}},
			}),
			want: profilebuild.Refusals{{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.pluginConfig[0]"}},
		},
		{
			name: "reserved schedulerName",
			sp:   profile("default", schedulingv1alpha1.SchedulingProfileSpec{SchedulerName: ptr.To("default-scheduler")}),
			want: profilebuild.Refusals{{Reason: schedulingv1alpha1.ReasonReservedSchedulerName, Field: "spec.schedulerName", Detail: "schedulerName default-scheduler is reserved for another scheduler; choose another name"}},
		},
		{
			name: "too large",
			sp: profile("large", schedulingv1alpha1.SchedulingProfileSpec{
				PluginConfig: []schedulingv1alpha1.PluginConfig{{Name: "NodeResourcesFit", Args: args(fmt.Sprintf(`{"note":%q}`, strings.Repeat("x", profilebuild.MaxSpecBytes)))}},
			}),
			want: profilebuild.Refusals{{Reason: schedulingv1alpha1.ReasonSpecTooLarge, Field: "spec"}, {Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.pluginConfig[0]"}},
		},
		{
			name: "extender at a URL not allowed",
			sp: profile("ext", schedulingv1alpha1.SchedulingProfileSpec{
				Extenders: []schedulingv1alpha1.Extender{{URLPrefix: "https://elsewhere.example/scheduler", FilterVerb: "filter", EnableHTTPS: true}},
			}),
			want: profilebuild.Refusals{{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.extenders"}},
		},
		{
			name: "extender at an allowed URL",
			sp: profile("ext-ok", schedulingv1alpha1.SchedulingProfileSpec{
				Extenders: []schedulingv1alpha1.Extender{{URLPrefix: "https://allowed.example/scheduler", FilterVerb: "filter", EnableHTTPS: true,
					TLSConfig: &schedulingv1alpha1.ExtenderTLSConfig{CASecretRef: &schedulingv1alpha1.SecretKeyReference{Name: "ca"}}}},
			}),
		},
		{
			name: "extender TLS from a file",
			sp: profile("ext-file", schedulingv1alpha1.SchedulingProfileSpec{
				Extenders: []schedulingv1alpha1.Extender{{URLPrefix: "https://allowed.example/scheduler", FilterVerb: "filter", EnableHTTPS: true,
					TLSConfig: &schedulingv1alpha1.ExtenderTLSConfig{CAFile: "/etc/ca.crt"}}},
			}),
			want: profilebuild.Refusals{{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.extenders[0].tlsConfig.caFile", Detail: "extenders[0].tlsConfig.caFile: not supported in a SchedulingProfile, which anyone who may read profiles can read and which names no file of the operator's; put the material in a Secret in namespace profile-scheduler-system and set caSecretRef"}},
		},
		{
			name: "every refusal, each with its path",
			sp: profile("many", schedulingv1alpha1.SchedulingProfileSpec{
				SchedulerName:            ptr.To("default-scheduler"),
				PercentageOfNodesToScore: ptr.To[int32](101),
				Plugins: &schedulingv1alpha1.Plugins{
					Filter:     schedulingv1alpha1.PluginSet{Enabled: []schedulingv1alpha1.Plugin{{Name: "NodeResourcesFit"}, {Name: "Nope"}}},
					MultiPoint: schedulingv1alpha1.PluginSet{Enabled: []schedulingv1alpha1.Plugin{{Name: "AlsoNope"}}},
				},
				PluginConfig: []schedulingv1alpha1.PluginConfig{{Name: "ImageLocality", Args: args(`{}`)}, {Name: "ImageLocality", Args: args(`{}`)}},
				Extenders: []schedulingv1alpha1.Extender{{URLPrefix: "https://allowed.example/scheduler", FilterVerb: "filter", EnableHTTPS: true,
					TLSConfig: &schedulingv1alpha1.ExtenderTLSConfig{CAFile: "/etc/ca.crt", CertData: []byte("x")}}},
			}),
			want: profilebuild.Refusals{
				{Reason: schedulingv1alpha1.ReasonReservedSchedulerName, Field: "spec.schedulerName", Detail: "schedulerName default-scheduler is reserved for another scheduler; choose another name"},
				{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.extenders[0].tlsConfig.caFile"},
				{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.extenders[0].tlsConfig.certData"},
				// A refused TLS field hides nothing that building finds.
				{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.percentageOfNodesToScore"},
				{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.plugins.multiPoint.enabled[0]"},
				{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.plugins.filter.enabled[1]"},
				{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.pluginConfig[0]"},
			},
		},
		{
			name: "every config error of the framework",
			sp: profile("many-plugins", schedulingv1alpha1.SchedulingProfileSpec{
				SchedulerName:            ptr.To("default-scheduler"),
				PercentageOfNodesToScore: ptr.To[int32](101),
				Plugins: &schedulingv1alpha1.Plugins{
					Filter:     schedulingv1alpha1.PluginSet{Enabled: []schedulingv1alpha1.Plugin{{Name: "NodeResourcesFit"}, {Name: "Nope"}}},
					MultiPoint: schedulingv1alpha1.PluginSet{Enabled: []schedulingv1alpha1.Plugin{{Name: "AlsoNope"}}},
				},
				PluginConfig: []schedulingv1alpha1.PluginConfig{{Name: "NodeResourcesFit", Args: args(`{"nope":1}`)}, {Name: "NodeResourcesFit", Args: args(`{}`)}},
			}),
			want: profilebuild.Refusals{
				{Reason: schedulingv1alpha1.ReasonReservedSchedulerName, Field: "spec.schedulerName", Detail: "schedulerName default-scheduler is reserved for another scheduler; choose another name"},
				{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.percentageOfNodesToScore", Detail: "percentageOfNodesToScore 101 is not in [0, 100]"},
				{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.plugins.multiPoint.enabled[0]", Detail: `MultiPoint plugin "AlsoNope": no such plugin is registered`},
				{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.plugins.filter.enabled[1]", Detail: `Filter plugin "Nope": no such plugin is registered`},
				{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.pluginConfig[0]", Detail: `PluginConfig plugin "NodeResourcesFit": args given more than once`},
				{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.pluginConfig[0]"},
			},
		},
		{
			name: "ignoredByScheduler with NodeResourcesFit disabled",
			sp: profile("ignored", schedulingv1alpha1.SchedulingProfileSpec{
				SchedulerName: ptr.To("default-scheduler"),
				Plugins:       &schedulingv1alpha1.Plugins{MultiPoint: schedulingv1alpha1.PluginSet{Disabled: []schedulingv1alpha1.Plugin{{Name: "NodeResourcesFit"}}}},
				Extenders: []schedulingv1alpha1.Extender{{URLPrefix: "https://allowed.example/scheduler", FilterVerb: "filter", EnableHTTPS: true,
					ManagedResources: []schedulingv1alpha1.ExtenderManagedResource{{Name: "example.com/gpu", IgnoredByScheduler: true}}}},
			}),
			want: profilebuild.Refusals{
				{Reason: schedulingv1alpha1.ReasonReservedSchedulerName, Field: "spec.schedulerName", Detail: "schedulerName default-scheduler is reserved for another scheduler; choose another name"},
				{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec.extenders[0].managedResources[0].ignoredByScheduler"},
			},
		},
		{
			name: "ignoredByScheduler",
			sp: profile("ignored-ok", schedulingv1alpha1.SchedulingProfileSpec{
				Extenders: []schedulingv1alpha1.Extender{{URLPrefix: "https://allowed.example/scheduler", FilterVerb: "filter", EnableHTTPS: true,
					ManagedResources: []schedulingv1alpha1.ExtenderManagedResource{{Name: "example.com/gpu", IgnoredByScheduler: true}}}},
			}),
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := v.Check(t.Context(), tt.sp)
			// A want without a detail checks the reason and path only.
			for i := range got {
				if i < len(tt.want) && tt.want[i].Detail == "" {
					got[i].Detail = ""
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("refusals (-want +got):\n%s", diff)
			}
		})
	}
}
