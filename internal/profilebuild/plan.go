package profilebuild

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	configv1 "k8s.io/kube-scheduler/config/v1"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// MaxSpecBytes is the largest spec, as JSON, a profile may have. The API
// server stores an object of up to 1.5 MiB (etcd's default request limit);
// a spec of at most 1 MiB leaves half a MiB for the profile's metadata and
// status, and its ControllerRevision fits with room to spare.
const MaxSpecBytes = 1 << 20

// nodeResourcesFit is the plugin whose args take the resources extenders
// say the scheduler ignores.
const nodeResourcesFit = "NodeResourcesFit"

// Refusal is one reason a spec may not serve.
type Refusal struct {
	// Reason is the reason its Accepted condition gets.
	Reason string
	// Field is the path of the field it is about, e.g.
	// spec.extenders[0].tlsConfig.caFile; empty when it is about no one
	// field.
	Field string
	// Detail says what is wrong.
	Detail string
}

// String words r as it reads after the object it is about ("cannot be
// built: ..."), or alone for a reserved schedulerName.
func (r Refusal) String() string {
	switch r.Reason {
	case schedulingv1alpha1.ReasonReservedSchedulerName, schedulingv1alpha1.ReasonSpecTooLarge:
		return r.Detail
	}
	return "cannot be built: " + r.Detail
}

// Refusals are every reason a spec may not serve, in the order found.
type Refusals []Refusal

// Reason is the reason of the first refusal: the Accepted condition's.
func (rs Refusals) Reason() string {
	if len(rs) == 0 {
		return ""
	}
	return rs[0].Reason
}

// Message words every refusal after subject ("Generation 3",
// "SchedulingProfile gpu"): "Generation 3 cannot be built: A; B". A
// reserved schedulerName reads alone, as it is about the name, not the
// object.
func (rs Refusals) Message(subject string) string {
	var parts, built []string
	for _, r := range rs {
		switch r.Reason {
		case schedulingv1alpha1.ReasonReservedSchedulerName:
			parts = append(parts, r.Detail)
		case schedulingv1alpha1.ReasonSpecTooLarge:
			parts = append(parts, subject+" "+r.Detail)
		default:
			built = append(built, r.Detail)
		}
	}
	if len(built) > 0 {
		parts = append(parts, subject+" cannot be built: "+strings.Join(built, "; "))
	}
	return strings.Join(parts, "; ")
}

// SchedulerName is the schedulerName a profile claims: spec.schedulerName,
// else its name (the API server makes sure that is then a DNS-1123 label).
func SchedulerName(sp *schedulingv1alpha1.SchedulingProfile) string {
	if sp.Spec.SchedulerName != nil && *sp.Spec.SchedulerName != "" {
		return *sp.Spec.SchedulerName
	}
	return sp.Name
}

// Older says whether a claims a schedulerName before b: it was created
// first, or in the same second with a name that sorts first. The oldest
// claimant serves the name, whether or not its spec is valid, so a name
// never flaps between objects as specs change.
func Older(a, b *schedulingv1alpha1.SchedulingProfile) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// Options are what profiles are planned against: the default plugins,
// reserved names and extender policy the operator serves profiles with.
type Options struct {
	// DefaultPlugins are what a profile is merged onto.
	DefaultPlugins *configv1.Plugins
	// ReservedSchedulerNames may not be served.
	ReservedSchedulerNames []string
	// ExtenderPolicy says at which URLs extenders may be called.
	ExtenderPolicy extender.Policy
	// Namespace is the operator's, where extenders' TLS Secrets live.
	Namespace string
	// OmittedDefaultPlugins says which of upstream's default plugins a
	// profile would run upstream but does not run here, for status.
	OmittedDefaultPlugins func(*configv1.KubeSchedulerProfile) []string
	// WorkloadGates are the workload gates the operator runs with: they
	// let profiles enable the workload plugins and pod-group points.
	WorkloadGates runtime.WorkloadGates
}

// Planner plans profiles. It is safe for concurrent use.
type Planner struct {
	o        Options
	reserved sets.Set[string]
}

// NewPlanner returns a Planner for o.
func NewPlanner(o Options) *Planner {
	return &Planner{o: o, reserved: sets.New(o.ReservedSchedulerNames...)}
}

// Namespace is the operator's, where the Secrets plans reference live.
func (p *Planner) Namespace() string { return p.o.Namespace }

// SecretRef is a Secret of the operator's namespace an extender takes TLS
// material from.
type SecretRef struct {
	// Field is the path of the reference, e.g.
	// spec.extenders[0].tlsConfig.caSecretRef.
	Field string
	Name  string
	// Keys must all be set in the Secret's data.
	Keys []string
	// extender is the index of the extender it is for, and ca whether it
	// holds the CA rather than the client certificate.
	extender int
	ca       bool
}

// Plan is a spec ready to compile.
type Plan struct {
	SchedulerName string
	// Profile is the upstream profile the spec converts to, with the
	// resources extenders say the scheduler ignores in NodeResourcesFit's
	// args.
	Profile *configv1.KubeSchedulerProfile
	// Extenders are the spec's extenders in upstream's form, without the
	// TLS material of Secrets.
	Extenders []configv1.Extender
	// Secrets are the Secrets the extenders reference.
	Secrets []SecretRef
	// OmittedDefaultPlugins is status.omittedDefaultPlugins.
	OmittedDefaultPlugins []string
	// WorkloadAware says whether the profile schedules pod groups (see
	// runtime.WorkloadAware), and so needs the cluster to serve their API.
	WorkloadAware bool

	o *Options
	// refusals are the plan's own: Compile reports them with what
	// building finds, and builds no instance to serve while there are any.
	refusals Refusals
}

// Plan converts sp and checks what needs no instance: its schedulerName
// (a shadow claims none), its size and its extenders. It returns every
// refusal found, and a plan also when there are some: Compile builds it
// to find the rest (an extender whose TLS fields are refused is built
// without them), so that every refusal is reported at once.
func (p *Planner) Plan(sp *schedulingv1alpha1.SchedulingProfile) (*Plan, Refusals) {
	return p.PlanSpec(sp, &sp.Spec)
}

// PlanSpec plans spec for the object sp, whose own spec may be another
// one: restore plans the last valid spec of a profile.
func (p *Planner) PlanSpec(sp *schedulingv1alpha1.SchedulingProfile, spec *schedulingv1alpha1.SchedulingProfileSpec) (*Plan, Refusals) {
	name := SchedulerName(&schedulingv1alpha1.SchedulingProfile{ObjectMeta: sp.ObjectMeta, Spec: *spec})
	var refusals Refusals
	if spec.ShadowOf == nil && p.reserved.Has(name) {
		refusals = append(refusals, ReservedName(name))
	}
	if r := checkSize(spec); r != nil {
		refusals = append(refusals, *r)
	}
	plan := &Plan{SchedulerName: name, Profile: UpstreamProfile(name, spec), o: &p.o}
	exts, secrets, refused := extenders(spec.Extenders, p.o.Namespace)
	refusals = append(refusals, refused...)
	plan.Extenders, plan.Secrets = exts, secrets
	refusals = append(refusals, p.ignoreResources(plan.Profile, spec.Extenders)...)
	if p.o.OmittedDefaultPlugins != nil {
		plan.OmittedDefaultPlugins = p.o.OmittedDefaultPlugins(plan.Profile)
	}
	plan.WorkloadAware = runtime.WorkloadAware(p.o.DefaultPlugins, plan.Profile.Plugins, p.o.WorkloadGates)
	plan.refusals = refusals
	return plan, refusals
}

// ReservedName refuses a schedulerName that another scheduler serves.
func ReservedName(name string) Refusal {
	return Refusal{
		Reason: schedulingv1alpha1.ReasonReservedSchedulerName,
		Field:  "spec.schedulerName",
		Detail: fmt.Sprintf("schedulerName %s is reserved for another scheduler; choose another name", name),
	}
}

// checkSize refuses a spec larger than MaxSpecBytes as JSON.
func checkSize(spec *schedulingv1alpha1.SchedulingProfileSpec) *Refusal {
	data, err := json.Marshal(spec)
	if err != nil {
		return &Refusal{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec", Detail: fmt.Sprintf("cannot be serialized: %v", err)}
	}
	if len(data) > MaxSpecBytes {
		return &Refusal{Reason: schedulingv1alpha1.ReasonSpecTooLarge, Field: "spec", Detail: fmt.Sprintf(
			"is %d bytes as JSON, more than the %d bytes a profile spec may have; split it or shorten the plugin args", len(data), MaxSpecBytes)}
	}
	return nil
}

// ignoreResources does what kube-scheduler's buildExtenders does with the
// managed resources an extender marks ignoredByScheduler: NodeResourcesFit
// gets them as its args' ignoredResources, in place of any written there
// (upstream: "the extender ignored resources take precedence"). Upstream
// does it for every profile, as its extenders serve every profile; here
// a profile's extenders serve that profile only.
func (p *Planner) ignoreResources(profile *configv1.KubeSchedulerProfile, exts []schedulingv1alpha1.Extender) Refusals {
	var ignored []string
	field := ""
	for i := range exts {
		for j, m := range exts[i].ManagedResources {
			if m.IgnoredByScheduler {
				ignored = append(ignored, m.Name)
				if field == "" {
					field = fmt.Sprintf("spec.extenders[%d].managedResources[%d].ignoredByScheduler", i, j)
				}
			}
		}
	}
	if len(ignored) == 0 {
		return nil
	}
	if !runtime.EnabledPlugins(p.o.DefaultPlugins, profile.Plugins).Has(nodeResourcesFit) {
		// Upstream's error, and what it means here.
		return Refusals{{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: field, Detail: fmt.Sprintf(
			"%s: can't find NodeResourcesFitArgs in plugin config: an extender says the scheduler ignores %s, which only NodeResourcesFit can do, and this profile does not enable it",
			strings.TrimPrefix(field, "spec."), strings.Join(ignored, ", "))}}
	}
	for i := range profile.PluginConfig {
		pc := &profile.PluginConfig[i]
		if pc.Name != nodeResourcesFit {
			continue
		}
		args := map[string]any{}
		if raw := pc.Args.Raw; len(raw) > 0 {
			data, err := utilyaml.ToJSON(raw)
			if err == nil {
				err = json.Unmarshal(data, &args)
			}
			if err != nil {
				// Left as written: building the instance refuses the
				// args with the decoder's own message.
				return nil
			}
		}
		args["ignoredResources"] = ignored
		data, err := json.Marshal(args)
		if err != nil {
			return Refusals{{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: fmt.Sprintf("spec.pluginConfig[%d].args", i), Detail: err.Error()}}
		}
		pc.Args = k8sruntime.RawExtension{Raw: data}
		return nil
	}
	data, err := json.Marshal(map[string]any{"ignoredResources": ignored})
	if err != nil {
		return Refusals{{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: field, Detail: err.Error()}}
	}
	profile.PluginConfig = append(profile.PluginConfig, configv1.PluginConfig{Name: nodeResourcesFit, Args: k8sruntime.RawExtension{Raw: data}})
	return nil
}

// defaultCAKey is the key of a CA Secret when caSecretRef names none.
const defaultCAKey = "ca.crt"

// extenders turns a profile's extenders into upstream's form, without the
// TLS material, and lists the Secrets that hold it. Upstream's file and
// inline-data fields are refused: a file path would name the operator's
// own filesystem, and inline data would publish a key in a cluster-scoped
// object.
func extenders(exts []schedulingv1alpha1.Extender, namespace string) ([]configv1.Extender, []SecretRef, Refusals) {
	if len(exts) == 0 {
		return nil, nil, nil
	}
	var refusals Refusals
	var secrets []SecretRef
	out := make([]configv1.Extender, len(exts))
	for i := range exts {
		e := &exts[i]
		cfg := configv1.Extender{
			URLPrefix:        e.URLPrefix,
			FilterVerb:       e.FilterVerb,
			PreemptVerb:      e.PreemptVerb,
			PrioritizeVerb:   e.PrioritizeVerb,
			Weight:           e.Weight,
			BindVerb:         e.BindVerb,
			EnableHTTPS:      e.EnableHTTPS,
			HTTPTimeout:      e.HTTPTimeout,
			NodeCacheCapable: e.NodeCacheCapable,
			Ignorable:        e.Ignorable,
		}
		for _, m := range e.ManagedResources {
			cfg.ManagedResources = append(cfg.ManagedResources, configv1.ExtenderManagedResource{Name: m.Name, IgnoredByScheduler: m.IgnoredByScheduler})
		}
		if t := e.TLSConfig; t != nil {
			path := fmt.Sprintf("extenders[%d].tlsConfig", i)
			refused := false
			for _, f := range []struct {
				name, use string
				set       bool
			}{
				{"certFile", "certSecretRef", t.CertFile != ""},
				{"keyFile", "certSecretRef", t.KeyFile != ""},
				{"caFile", "caSecretRef", t.CAFile != ""},
				{"certData", "certSecretRef", len(t.CertData) != 0},
				{"keyData", "certSecretRef", len(t.KeyData) != 0},
				{"caData", "caSecretRef", len(t.CAData) != 0},
			} {
				if f.set {
					refused = true
					refusals = append(refusals, Refusal{Reason: schedulingv1alpha1.ReasonInvalidSpec, Field: "spec." + path + "." + f.name, Detail: fmt.Sprintf(
						"%s.%s: not supported in a SchedulingProfile, which anyone who may read profiles can read and which names no file of the operator's; put the material in a Secret in namespace %s and set %s",
						path, f.name, namespace, f.use)})
				}
			}
			cfg.TLSConfig = &configv1.ExtenderTLSConfig{Insecure: t.Insecure, ServerName: t.ServerName}
			if refused {
				out[i] = cfg
				continue
			}
			if ref := t.CertSecretRef; ref != nil {
				secrets = append(secrets, SecretRef{Field: "spec." + path + ".certSecretRef", Name: ref.Name, Keys: []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey}, extender: i})
			}
			if ref := t.CASecretRef; ref != nil {
				key := ref.Key
				if key == "" {
					key = defaultCAKey
				}
				secrets = append(secrets, SecretRef{Field: "spec." + path + ".caSecretRef", Name: ref.Name, Keys: []string{key}, extender: i, ca: true})
			}
		}
		out[i] = cfg
	}
	return out, secrets, refusals
}

// ReferencedSecrets are the names of the Secrets spec's extenders take TLS
// material from, for an index of profiles by Secret.
func ReferencedSecrets(spec *schedulingv1alpha1.SchedulingProfileSpec) []string {
	names := sets.New[string]()
	for _, e := range spec.Extenders {
		if t := e.TLSConfig; t != nil {
			if t.CertSecretRef != nil {
				names.Insert(t.CertSecretRef.Name)
			}
			if t.CASecretRef != nil {
				names.Insert(t.CASecretRef.Name)
			}
		}
	}
	return sets.List(names)
}
