package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	configv1 "k8s.io/kube-scheduler/config/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
)

const convertUsage = `Usage: profile-scheduler convert [flags] FILE

Turns a kube-scheduler configuration file (a kubescheduler.config.k8s.io/v1
KubeSchedulerConfiguration; "-" reads standard input) into SchedulingProfile
manifests on standard output, one per profile, named after its
schedulerName. The profiles are kept as written: no defaults are filled in.
The configuration's extenders are copied into every profile. Standard error
lists the operator flags the global settings map to, the settings that have
no counterpart, the Secrets to create for extenders' TLS files, and every
profile that would be refused, judged as by "profile-scheduler validate" with
the flags below and the reported --allowed-extender-url-prefixes. Exits 1
when a profile would be refused (the manifests are written all the same), 2
when the file cannot be read.

Flags:
`

// Convert runs `profile-scheduler convert` and returns its exit code.
func Convert(ctx context.Context, args []string, s Streams) int {
	fs := newFlagSet("convert", convertUsage, s)
	var vf operator.ValidationFlags
	vf.AddFlags(fs)
	namespace := fs.String("namespace", defaultNamespace, "The operator's namespace, where extenders' TLS Secrets go.")
	var in input
	in.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return ExitUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return ExitUsage
	}
	name, r := fs.Arg(0), s.In
	if name == "-" {
		name = stdinName
	} else {
		f, err := os.Open(name)
		if err != nil {
			_, _ = fmt.Fprintf(s.Err, "convert: %v\n", err)
			return ExitUsage
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	conv, err := convert(in.limit(r), *namespace)
	if err != nil {
		_, _ = fmt.Fprintf(s.Err, "convert: %s: %v\n", name, err)
		return ExitUsage
	}
	// Judge the profiles as the operator run with the reported flags
	// would.
	vf.AllowedExtenderURLPrefixes = strings.Join(append(operator.SplitList(vf.AllowedExtenderURLPrefixes), conv.extenderPrefixes...), ",")
	c, err := newChecker(vf, *namespace)
	if err != nil {
		_, _ = fmt.Fprintf(s.Err, "convert: %v\n", err)
		return ExitUsage
	}
	for _, n := range conv.notes {
		_, _ = fmt.Fprintf(s.Err, "convert: %s\n", n)
	}
	code := 0
	for i, m := range conv.manifests {
		if i > 0 {
			_, _ = fmt.Fprintln(s.Out, "---")
		}
		_, _ = s.Out.Write(m)
		// The output's documents are judged as validate would judge
		// them once committed.
		var sum summary
		for _, f := range c.checkDocument(ctx, document{file: name, index: i + 1, data: m}, &sum) {
			_, _ = fmt.Fprintf(s.Err, "convert: profiles[%d]: SchedulingProfile %s would be refused: %s\n", i, f.profile, f.message)
			code = ExitRefused
		}
	}
	return code
}

// conversion is what a KubeSchedulerConfiguration turns into.
type conversion struct {
	// manifests are the SchedulingProfiles as YAML, one per profile.
	manifests [][]byte
	// notes tell what else to do, or what was left behind.
	notes []string
	// extenderPrefixes are the URL prefixes the extenders need allowed.
	extenderPrefixes []string
}

// convert reads a KubeSchedulerConfiguration. It is decoded strictly, as
// kube-scheduler's loader does (an unknown or repeated field is an
// error), but the manifests are made from the document as written, so
// that no default upstream would fill in is written into them.
func convert(r io.Reader, namespace string) (*conversion, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	jsonData, err := document{data: data}.toJSON()
	if err != nil {
		return nil, err
	}
	var cfg configv1.KubeSchedulerConfiguration
	strict, err := sigsjson.UnmarshalStrict(jsonData, &cfg, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, errors.New(oneLine(err.Error()))
	}
	// v1 is the only version kube-scheduler still loads.
	if gvk := cfg.GroupVersionKind(); gvk != configv1.SchemeGroupVersion.WithKind("KubeSchedulerConfiguration") {
		return nil, fmt.Errorf("apiVersion %q, kind %q: not a %s KubeSchedulerConfiguration", cfg.APIVersion, cfg.Kind, configv1.SchemeGroupVersion)
	}
	if len(strict) > 0 {
		return nil, runtime.NewStrictDecodingError(strict)
	}
	var raw struct {
		Profiles  []map[string]any `json:"profiles"`
		Extenders []map[string]any `json:"extenders"`
	}
	if err := utiljson.Unmarshal(jsonData, &raw); err != nil {
		return nil, err
	}

	conv := &conversion{notes: globalSettings(&cfg)}
	for _, e := range cfg.Extenders {
		if !slices.Contains(conv.extenderPrefixes, e.URLPrefix) {
			conv.extenderPrefixes = append(conv.extenderPrefixes, e.URLPrefix)
		}
	}
	if len(conv.extenderPrefixes) > 0 {
		conv.notes = append(conv.notes, fmt.Sprintf("extenders: copied into every profile's spec.extenders; set operator flag --allowed-extender-url-prefixes=%s", strings.Join(conv.extenderPrefixes, ",")))
	}
	if len(raw.Profiles) == 0 {
		// kube-scheduler serves its default profile then.
		raw.Profiles = []map[string]any{{}}
		conv.notes = append(conv.notes, fmt.Sprintf("profiles: none given; kube-scheduler then serves its default profile as %s, and so does the SchedulingProfile written for it", defaultSchedulerName))
	}
	for i, p := range raw.Profiles {
		m, notes, err := profileManifest(p, raw.Extenders, namespace)
		if err != nil {
			return nil, fmt.Errorf("profiles[%d]: %w", i, err)
		}
		conv.manifests = append(conv.manifests, m)
		conv.notes = append(conv.notes, notes...)
	}
	return conv, nil
}

// defaultSchedulerName is the schedulerName of a kube-scheduler profile
// that sets none.
const defaultSchedulerName = "default-scheduler"

// profileManifest returns the SchedulingProfile for one upstream profile,
// with the configuration's extenders, and notes on the Secrets their TLS
// files need.
func profileManifest(profile map[string]any, extenders []map[string]any, namespace string) ([]byte, []string, error) {
	spec := map[string]any{}
	for k, v := range profile {
		spec[k] = v
	}
	// metadata.name carries the schedulerName: a profile without
	// spec.schedulerName serves its name.
	name, _ := spec["schedulerName"].(string)
	if name == "" {
		name = defaultSchedulerName
	}
	delete(spec, "schedulerName")
	var notes []string
	if len(extenders) > 0 {
		exts := make([]any, len(extenders))
		for i, e := range extenders {
			ext, n, err := profileExtender(name, i, e, namespace)
			if err != nil {
				return nil, nil, err
			}
			exts[i] = ext
			notes = append(notes, n...)
		}
		spec["extenders"] = exts
	}
	obj := map[string]any{
		"apiVersion": schedulingv1alpha1.GroupVersion.String(),
		"kind":       "SchedulingProfile",
		"metadata":   map[string]any{"name": name},
	}
	if len(spec) > 0 {
		obj["spec"] = spec
	}
	data, err := yaml.Marshal(obj)
	return data, notes, err
}

// profileExtender copies an upstream extender for the profile name. Its
// TLS files and inline data cannot be carried: a profile names no file of
// the operator's, and anyone who may read profiles would read inline keys.
// They are replaced by references to Secrets named after the profile and
// the extender, and the notes say how to create them.
func profileExtender(profile string, i int, ext map[string]any, namespace string) (map[string]any, []string, error) {
	out := map[string]any{}
	for k, v := range ext {
		out[k] = v
	}
	tls, ok := ext["tlsConfig"].(map[string]any)
	if !ok {
		return out, nil, nil
	}
	t := map[string]any{}
	for k, v := range tls {
		t[k] = v
	}
	out["tlsConfig"] = t
	var notes []string
	// Upstream's TLS fields a profile cannot carry, by the Secret
	// reference that replaces them.
	for _, r := range []struct {
		ref    string
		fields []string
	}{
		{"certSecretRef", []string{"certFile", "keyFile", "certData", "keyData"}},
		{"caSecretRef", []string{"caFile", "caData"}},
	} {
		ref := r.ref
		var fields []string
		for _, f := range r.fields {
			if _, ok := t[f]; ok {
				fields = append(fields, f)
				delete(t, f)
			}
		}
		if len(fields) == 0 {
			continue
		}
		secret := fmt.Sprintf("%s-extender-%d-%s", profile, i, strings.TrimSuffix(ref, "SecretRef"))
		t[ref] = map[string]any{"name": secret}
		create := fmt.Sprintf("kubectl -n %s create secret tls %s --cert=%s --key=%s", namespace, secret, file(tls, "certFile", "certData"), file(tls, "keyFile", "keyData"))
		if ref == "caSecretRef" {
			create = fmt.Sprintf("kubectl -n %s create secret generic %s --from-file=ca.crt=%s", namespace, secret, file(tls, "caFile", "caData"))
		}
		notes = append(notes, fmt.Sprintf(
			"SchedulingProfile %s: extenders[%d].tlsConfig.%s cannot be carried (a profile names no file of the operator's and publishes no key); %s names Secret %s instead, to create and label for the profile: %s && kubectl -n %s label secret %s %s=%s",
			profile, i, strings.Join(fields, ", "), ref, secret, create, namespace, secret, schedulingv1alpha1.ExtenderTLSLabel, profile))
	}
	return out, notes, nil
}

// file names the file holding an extender's TLS material in upstream's
// tlsConfig: the file field's value, else where to put the inline data.
func file(tls map[string]any, fileField, dataField string) string {
	if f, ok := tls[fileField].(string); ok && f != "" {
		return f
	}
	return "FILE_OF_" + dataField
}

// globalSettings reports what the configuration sets beside its profiles:
// the operator flag each maps to, or that it has none.
func globalSettings(cfg *configv1.KubeSchedulerConfiguration) []string {
	var notes []string
	flagFor := func(set bool, field, format string, v any) {
		if set {
			notes = append(notes, fmt.Sprintf("%s: set operator flag "+format, field, v))
		}
	}
	noneFor := func(set bool, field, why string) {
		if set {
			notes = append(notes, fmt.Sprintf("%s: no counterpart, not carried over: %s", field, why))
		}
	}
	if v := cfg.Parallelism; v != nil {
		flagFor(true, "parallelism", "--parallelism=%d", *v)
	}
	if v := cfg.PercentageOfNodesToScore; v != nil {
		flagFor(true, "percentageOfNodesToScore", "--percentage-of-nodes-to-score=%d", *v)
	}
	le := cfg.LeaderElection
	if v := le.LeaderElect; v != nil {
		flagFor(true, "leaderElection.leaderElect", "--leader-elect=%t", *v)
	}
	flagFor(le.LeaseDuration.Duration != 0, "leaderElection.leaseDuration", "--leader-elect-lease-duration=%s", le.LeaseDuration.Duration)
	flagFor(le.RenewDeadline.Duration != 0, "leaderElection.renewDeadline", "--leader-elect-renew-deadline=%s", le.RenewDeadline.Duration)
	flagFor(le.RetryPeriod.Duration != 0, "leaderElection.retryPeriod", "--leader-elect-retry-period=%s", le.RetryPeriod.Duration)
	flagFor(le.ResourceName != "", "leaderElection.resourceName", "--leader-election-id=%s", le.ResourceName)
	flagFor(le.ResourceNamespace != "", "leaderElection.resourceNamespace", "--leader-election-namespace=%s", le.ResourceNamespace)
	noneFor(le.ResourceLock != "" && le.ResourceLock != "leases", "leaderElection.resourceLock", "the operator always elects with a Lease")
	cc := cfg.ClientConnection
	flagFor(cc.Kubeconfig != "", "clientConnection.kubeconfig", "--kubeconfig=%s", cc.Kubeconfig)
	flagFor(cc.QPS != 0, "clientConnection.qps", "--kube-api-qps=%g", cc.QPS)
	flagFor(cc.Burst != 0, "clientConnection.burst", "--kube-api-burst=%d", cc.Burst)
	noneFor(cc.AcceptContentTypes != "", "clientConnection.acceptContentTypes", "the operator's client chooses its content types")
	noneFor(cc.ContentType != "", "clientConnection.contentType", "the operator's client chooses its content types")
	if v := cfg.EnableProfiling; v != nil {
		flagFor(true, "enableProfiling", "--profiling=%t", *v)
	}
	noneFor(cfg.EnableContentionProfiling != nil, "enableContentionProfiling", "not offered")
	noneFor(cfg.PodInitialBackoffSeconds != nil, "podInitialBackoffSeconds", "the operator's backoff is upstream's default, 1s initial")
	noneFor(cfg.PodMaxBackoffSeconds != nil, "podMaxBackoffSeconds", "the operator's backoff is upstream's default, 10s at most")
	noneFor(cfg.DelayCacheUntilActive, "delayCacheUntilActive", "every replica keeps its caches warm, so that a standby takes over at once")
	return notes
}
