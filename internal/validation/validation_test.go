package validation_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/internal/validation"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
)

// TestValidate checks specs offline, without a cluster, as
// `profile-scheduler validate` does: the refusals are those the controller
// reports in status.
func TestValidate(t *testing.T) {
	policy, err := extender.NewPolicy([]string{"https://allowed.example"}, extender.DefaultMaxReplyBytes)
	if err != nil {
		t.Fatal(err)
	}
	v, err := operator.OfflineValidator([]string{"default-scheduler"}, policy, "profile-scheduler-system")
	if err != nil {
		t.Fatal(err)
	}
	profile := func(name string, spec schedulingv1alpha1.SchedulingProfileSpec) *schedulingv1alpha1.SchedulingProfile {
		sp := &schedulingv1alpha1.SchedulingProfile{Spec: spec}
		sp.Name = name
		return sp
	}
	args := func(json string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(json)} }
	for _, tt := range []struct {
		name string
		sp   *schedulingv1alpha1.SchedulingProfile
		want *validation.Refusal
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
			want: &validation.Refusal{Reason: schedulingv1alpha1.ReasonInvalidSpec, Message: `cannot be built: Filter plugin "NodeResourcesFits": no such plugin is registered`},
		},
		{
			name: "unknown args field",
			sp: profile("args", schedulingv1alpha1.SchedulingProfileSpec{
				PluginConfig: []schedulingv1alpha1.PluginConfig{{Name: "NodeResourcesFit", Args: args(`{"scoringStrategy":{"type":"MostAllocated"},"ignoredResource":["x"]}`)}},
			}),
			want: &validation.Refusal{Reason: schedulingv1alpha1.ReasonInvalidSpec},
		},
		{
			name: "reserved schedulerName",
			sp:   profile("default", schedulingv1alpha1.SchedulingProfileSpec{SchedulerName: ptr.To("default-scheduler")}),
			want: &validation.Refusal{Reason: schedulingv1alpha1.ReasonReservedSchedulerName, Message: "schedulerName default-scheduler is reserved for another scheduler; choose another name"},
		},
		{
			name: "too large",
			sp: profile("large", schedulingv1alpha1.SchedulingProfileSpec{
				PluginConfig: []schedulingv1alpha1.PluginConfig{{Name: "NodeResourcesFit", Args: args(fmt.Sprintf(`{"note":%q}`, strings.Repeat("x", validation.MaxSpecBytes)))}},
			}),
			want: &validation.Refusal{Reason: schedulingv1alpha1.ReasonSpecTooLarge},
		},
		{
			name: "extender at a URL not allowed",
			sp: profile("ext", schedulingv1alpha1.SchedulingProfileSpec{
				Extenders: []schedulingv1alpha1.Extender{{URLPrefix: "https://elsewhere.example/scheduler", FilterVerb: "filter", EnableHTTPS: true}},
			}),
			want: &validation.Refusal{Reason: schedulingv1alpha1.ReasonInvalidSpec},
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
			want: &validation.Refusal{Reason: schedulingv1alpha1.ReasonInvalidSpec, Message: "cannot be built: extenders[0].tlsConfig.caFile: not supported in a SchedulingProfile, which anyone who may read profiles can read and which names no file of the operator's; put the material in a Secret in namespace profile-scheduler-system and set caSecretRef"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := v.Validate(t.Context(), tt.sp)
			if tt.want == nil || got == nil {
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Fatalf("(-want +got):\n%s", diff)
				}
				return
			}
			if got.Reason != tt.want.Reason {
				t.Errorf("reason %q, want %q (message %q)", got.Reason, tt.want.Reason, got.Message)
			}
			if tt.want.Message != "" && got.Message != tt.want.Message {
				t.Errorf("message:\n got %q\nwant %q", got.Message, tt.want.Message)
			}
		})
	}
}
