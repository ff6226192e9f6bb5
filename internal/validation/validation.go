// Package validation decides whether a SchedulingProfile may serve. The
// SchedulingProfile controller, the admission webhook and
// `profile-scheduler validate` all go through it, so a spec is refused at
// apply time, in CI and in status with the same reason and message, and
// the webhook builds a spec exactly as the controller does.
//
// What only the cluster can tell — whether an extender's TLS Secret exists
// and is labelled for the profile, whether an older profile claims the same
// schedulerName — is checked by the controller alone, when it builds the
// instance; status is the backstop for it.
package validation

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/cache"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// MaxSpecBytes is the largest spec, as JSON, a profile may have. The API
// server stores an object of up to 1.5 MiB (etcd's default request limit);
// a spec of at most 1 MiB leaves half a MiB for the profile's metadata and
// status, and its ControllerRevision fits with room to spare.
const MaxSpecBytes = 1 << 20

// Refusal is why a spec may not serve: the reason its Accepted condition
// gets, and a message that reads after the object it is about
// ("Generation 3 cannot be built: ...", "SchedulingProfile gpu cannot be
// built: ...").
type Refusal struct {
	Reason  string
	Message string
}

func (r *Refusal) Error() string { return r.Message }

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

// ReservedName refuses a schedulerName that another scheduler serves.
func ReservedName(name string) *Refusal {
	return &Refusal{
		Reason:  schedulingv1alpha1.ReasonReservedSchedulerName,
		Message: fmt.Sprintf("schedulerName %s is reserved for another scheduler; choose another name", name),
	}
}

// CheckSize refuses a spec larger than MaxSpecBytes as JSON.
func CheckSize(spec *schedulingv1alpha1.SchedulingProfileSpec) *Refusal {
	data, err := json.Marshal(spec)
	if err != nil {
		return &Refusal{Reason: schedulingv1alpha1.ReasonInvalidSpec, Message: fmt.Sprintf("cannot be serialized: %v", err)}
	}
	if len(data) > MaxSpecBytes {
		return &Refusal{Reason: schedulingv1alpha1.ReasonSpecTooLarge, Message: fmt.Sprintf(
			"is %d bytes as JSON, more than the %d bytes a profile spec may have; split it or shorten the plugin args", len(data), MaxSpecBytes)}
	}
	return nil
}

// NotBuilt is the refusal of a spec the framework or its extenders refuse.
func NotBuilt(err error) *Refusal {
	return &Refusal{Reason: schedulingv1alpha1.ReasonInvalidSpec, Message: fmt.Sprintf("cannot be built: %v", err)}
}

// Options are what a Validator checks profiles against: the same registry,
// default plugins, reserved names and extender policy the operator serves
// profiles with.
type Options struct {
	// Registry holds every plugin a profile may use, ManualApproval and
	// Coscheduling included.
	Registry runtime.Registry
	// DefaultPlugins are what a profile is merged onto.
	DefaultPlugins *configv1.Plugins
	// ReservedSchedulerNames may not be served.
	ReservedSchedulerNames []string
	// ExtenderPolicy says at which URLs extenders may be called.
	ExtenderPolicy extender.Policy
	// Namespace is the operator's, where extenders' TLS Secrets live.
	Namespace string
	// Client is handed to plugin factories, which may make informers on
	// it. Those informers are never started and the client is never
	// called while validating, so nil does for validating offline.
	Client kubernetes.Interface
}

// Validator checks profiles as the controller builds them, without
// serving them. It is safe for concurrent use.
type Validator struct {
	o        Options
	reserved sets.Set[string]
	// informers is handed to plugin factories so they find the informers
	// they ask for; it is never started, so it costs no watch.
	informers informers.SharedInformerFactory
}

// New returns a Validator for o.
func New(o Options) *Validator {
	return &Validator{o: o, reserved: sets.New(o.ReservedSchedulerNames...), informers: informers.NewSharedInformerFactory(o.Client, 0)}
}

// Validate returns why sp may not serve, or nil. It builds an instance
// of the spec with the operator's registry and closes it: every plugin
// name, extension point, args object and extender is checked as when
// the instance that serves is built.
func (v *Validator) Validate(ctx context.Context, sp *schedulingv1alpha1.SchedulingProfile) *Refusal {
	name := SchedulerName(sp)
	// A shadow (spec.shadowOf) claims no schedulerName.
	if sp.Spec.ShadowOf == nil && v.reserved.Has(name) {
		return ReservedName(name)
	}
	if r := CheckSize(&sp.Spec); r != nil {
		return r
	}
	exts, err := Extenders(ctx, sp.Spec.Extenders, v.o.Namespace, nil)
	if err != nil {
		return NotBuilt(err)
	}
	opts := []runtime.Option{
		runtime.WithClientSet(v.o.Client),
		runtime.WithInformerFactory(v.informers),
		// Plugins keep the lister to read in their cycles; an empty one
		// does for building.
		runtime.WithSnapshotSharedLister(cache.NewEmptySnapshot()),
		runtime.WithExtenders(exts),
		runtime.WithExtenderPolicy(v.o.ExtenderPolicy),
	}
	if v.o.DefaultPlugins != nil {
		opts = append(opts, runtime.WithDefaultPlugins(v.o.DefaultPlugins))
	}
	fwk, err := runtime.NewFramework(ctx, v.o.Registry, UpstreamProfile(name, &sp.Spec), opts...)
	if err != nil {
		return NotBuilt(err)
	}
	if err := fwk.Close(); err != nil {
		klog.FromContext(ctx).Error(err, "Closing an instance built to validate a profile", "schedulingProfile", klog.KObj(sp))
	}
	return nil
}

// SecretReader reads the data of the Secret name, in the operator's
// namespace, that holds TLS material for an extender; path names the
// field that references it, for errors.
type SecretReader func(ctx context.Context, path, name string, keys ...string) (map[string][]byte, error)

// defaultCAKey is the key of a CA Secret when caSecretRef names none.
const defaultCAKey = "ca.crt"

// Extenders turns a profile's extenders into upstream's form, with the TLS
// material read through secrets; nil secrets leaves the material out (it
// is checked when the serving instance is built). Upstream's file and
// inline-data fields are refused: a file path would name the operator's
// own filesystem, and inline data would publish a key in a cluster-scoped
// object.
func Extenders(ctx context.Context, exts []schedulingv1alpha1.Extender, namespace string, secrets SecretReader) ([]configv1.Extender, error) {
	if len(exts) == 0 {
		return nil, nil
	}
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
		for j, m := range e.ManagedResources {
			if m.IgnoredByScheduler {
				return nil, fmt.Errorf("extenders[%d].managedResources[%d].ignoredByScheduler: not supported: NodeResourcesFit always checks %s", i, j, m.Name)
			}
			cfg.ManagedResources = append(cfg.ManagedResources, configv1.ExtenderManagedResource{Name: m.Name})
		}
		if t := e.TLSConfig; t != nil {
			tls, err := extenderTLS(ctx, fmt.Sprintf("extenders[%d].tlsConfig", i), namespace, t, secrets)
			if err != nil {
				return nil, err
			}
			cfg.TLSConfig = tls
		}
		out[i] = cfg
	}
	return out, nil
}

func extenderTLS(ctx context.Context, path, namespace string, t *schedulingv1alpha1.ExtenderTLSConfig, secrets SecretReader) (*configv1.ExtenderTLSConfig, error) {
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
			return nil, fmt.Errorf("%s.%s: not supported in a SchedulingProfile, which anyone who may read profiles can read and which names no file of the operator's; put the material in a Secret in namespace %s and set %s", path, f.name, namespace, f.use)
		}
	}
	out := &configv1.ExtenderTLSConfig{Insecure: t.Insecure, ServerName: t.ServerName}
	if secrets == nil {
		return out, nil
	}
	if ref := t.CertSecretRef; ref != nil {
		data, err := secrets(ctx, path+".certSecretRef", ref.Name, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
		if err != nil {
			return nil, err
		}
		out.CertData, out.KeyData = data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey]
	}
	if ref := t.CASecretRef; ref != nil {
		key := ref.Key
		if key == "" {
			key = defaultCAKey
		}
		data, err := secrets(ctx, path+".caSecretRef", ref.Name, key)
		if err != nil {
			return nil, err
		}
		out.CAData = data[key]
	}
	return out, nil
}
