package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	sigsjson "sigs.k8s.io/json"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
)

const validateUsage = `Usage: profile-scheduler validate [flags] PATH...

Checks every SchedulingProfile in the files, directories (searched for
regular files named *.yaml, *.yml and *.json, skipping directories whose
names begin with a dot; symbolic links and other special files are skipped
and named) and standard input ("-") given, each read up to --max-file-bytes,
as the API server and the operator would: strict
decoding, the CRD's schema and rules, then the profile built with the
operator's plugins. Documents of other kinds are skipped. Prints one line per
finding, FILE:DOCUMENT: PROFILE: REASON, and exits 1 when there is any, 2 when
the command cannot run. Give it the operator's flags below to judge profiles
as that operator does.

Flags:
`

// Validate runs `profile-scheduler validate` and returns its exit code.
func Validate(ctx context.Context, args []string, s Streams) int {
	fs := newFlagSet("validate", validateUsage, s)
	var vf operator.ValidationFlags
	vf.AddFlags(fs)
	namespace := fs.String("namespace", defaultNamespace, "The operator's namespace, where extenders' TLS Secrets live, for messages.")
	var in input
	in.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return ExitUsage
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return ExitUsage
	}
	c, err := newChecker(vf, *namespace)
	if err != nil {
		_, _ = fmt.Fprintf(s.Err, "validate: %v\n", err)
		return ExitUsage
	}
	docs, skipped, err := in.readDocuments(fs.Args(), s.In)
	if err != nil {
		_, _ = fmt.Fprintf(s.Err, "validate: %v\n", err)
		return ExitUsage
	}
	for _, p := range skipped {
		_, _ = fmt.Fprintf(s.Err, "validate: %s: skipped: not a regular file\n", p)
	}
	var sum summary
	for _, d := range docs {
		for _, f := range c.checkDocument(ctx, d, &sum) {
			_, _ = fmt.Fprintln(s.Out, f)
		}
	}
	_, _ = fmt.Fprintf(s.Err, "validate: %s\n", sum)
	if sum.failed() {
		return ExitRefused
	}
	return 0
}

// checker judges SchedulingProfile documents.
type checker struct {
	schema  *schemaValidator
	checker *profilebuild.Checker
}

func newChecker(vf operator.ValidationFlags, namespace string) (*checker, error) {
	policy, err := vf.ExtenderPolicy()
	if err != nil {
		return nil, err
	}
	v, err := operator.OfflineChecker(vf.Reserved(), policy, vf.WorkloadGates(), namespace)
	if err != nil {
		return nil, err
	}
	schema, err := newSchemaValidator()
	if err != nil {
		return nil, err
	}
	return &checker{schema: schema, checker: v}, nil
}

// finding is one reason a document or a profile in it is refused.
type finding struct {
	doc document
	// profile is the profile's name, empty when the document could not
	// be read far enough to tell.
	profile string
	message string
}

func (f finding) String() string {
	if f.profile == "" {
		return fmt.Sprintf("%s: %s", f.doc, f.message)
	}
	return fmt.Sprintf("%s: %s: %s", f.doc, f.profile, f.message)
}

// summary counts what a run checked.
type summary struct {
	// profiles were checked, refused of them refused; malformed
	// documents could not be decoded; skipped ones are of other kinds.
	profiles, refused, malformed, skipped int
}

func (s summary) String() string {
	return fmt.Sprintf("%d SchedulingProfiles checked, %d refused; %d documents malformed; %d documents of other kinds skipped", s.profiles, s.refused, s.malformed, s.skipped)
}

// failed says whether anything was refused or malformed.
func (s summary) failed() bool { return s.refused > 0 || s.malformed > 0 }

// checkDocument returns the findings of one document, which may be a
// SchedulingProfile, a List of objects or anything else (skipped).
func (c *checker) checkDocument(ctx context.Context, d document, sum *summary) []finding {
	data, err := d.toJSON()
	if err != nil {
		sum.malformed++
		return []finding{{doc: d, message: err.Error()}}
	}
	var obj any
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		sum.malformed++
		return []finding{{doc: d, message: oneLine(err.Error())}}
	}
	m, ok := obj.(map[string]any)
	if !ok {
		// Empty (comments only), or not an object: no Kubernetes manifest.
		if obj != nil {
			sum.skipped++
		}
		return nil
	}
	u := &unstructured.Unstructured{Object: m}
	if u.IsList() && strings.HasSuffix(u.GetKind(), "List") {
		var out []finding
		err := u.EachListItem(func(item runtime.Object) error {
			raw, err := utiljson.Marshal(item.(*unstructured.Unstructured).Object)
			if err != nil {
				return err
			}
			out = append(out, c.checkObject(ctx, d, item.(*unstructured.Unstructured), raw, sum)...)
			return nil
		})
		if err != nil {
			sum.malformed++
			out = append(out, finding{doc: d, message: oneLine(err.Error())})
		}
		return out
	}
	return c.checkObject(ctx, d, u, data, sum)
}

// checkObject checks one object of a document, raw its JSON, when it is
// a SchedulingProfile, and counts it.
func (c *checker) checkObject(ctx context.Context, d document, u *unstructured.Unstructured, raw []byte, sum *summary) []finding {
	// A SchedulingProfile without apiVersion is one kubectl refuses, not
	// one of another group.
	gvk := u.GroupVersionKind()
	if gvk.Kind != "SchedulingProfile" || (gvk.Group != schedulingv1alpha1.GroupVersion.Group && u.GetAPIVersion() != "") {
		sum.skipped++
		return nil
	}
	sum.profiles++
	fs := c.check(ctx, d, u, raw)
	if len(fs) > 0 {
		sum.refused++
	}
	return fs
}

// check judges a SchedulingProfile in the order the API server and the
// webhook do: strict decoding, the CRD's schema and rules, then the
// operator's validation. Each step runs only when the one before passed,
// as at apply time.
func (c *checker) check(ctx context.Context, d document, u *unstructured.Unstructured, raw []byte) []finding {
	name := u.GetName()
	refuse := func(msg string) []finding { return []finding{{doc: d, profile: name, message: msg}} }
	if u.GetAPIVersion() == "" {
		return refuse("apiVersion: Required value: SchedulingProfile is " + schedulingv1alpha1.GroupVersion.String())
	}
	if gv := u.GroupVersionKind().GroupVersion(); gv != schedulingv1alpha1.GroupVersion {
		return refuse(fmt.Sprintf("apiVersion %s is not served: SchedulingProfile is %s", gv, schedulingv1alpha1.GroupVersion))
	}
	if name == "" {
		return refuse("metadata.name: Required value: kubectl apply needs a name")
	}
	var sp schedulingv1alpha1.SchedulingProfile
	strict, err := sigsjson.UnmarshalStrict(raw, &sp, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return refuse(oneLine(err.Error()))
	}
	if len(strict) > 0 {
		return refuse(runtime.NewStrictDecodingError(strict).Error())
	}
	// The API server clears the namespace of a cluster-scoped object
	// before it validates it.
	unstructured.RemoveNestedField(u.Object, "metadata", "namespace")
	var out []finding
	for _, e := range c.schema.validate(ctx, u) {
		out = append(out, finding{doc: d, profile: name, message: e.Error()})
	}
	if len(out) > 0 {
		return out
	}
	// Every refusal, each on a line of its own.
	for _, r := range c.checker.Check(ctx, &sp) {
		out = append(out, finding{doc: d, profile: name, message: r.String()})
	}
	return out
}
