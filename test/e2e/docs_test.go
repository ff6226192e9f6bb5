package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/tools/events"

	"github.com/schedprofiles/profile-scheduler/internal/cli"
	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// TestCompatibilityTable keeps docs/compatibility.md's plugin table in step
// with the registry: every plugin of upstream's default profile is listed,
// as built exactly when the registry has it.
func TestCompatibilityTable(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\| (\w+) \| (built|not built yet) \|`).FindAllStringSubmatch(string(data), -1) {
		documented[m[1]] = m[2]
	}
	want := map[string]string{}
	for _, name := range plugins.OmittedDefaultPlugins() {
		want[name] = "not built yet"
	}
	registry := plugins.NewInTreeRegistry()
	for name := range documented {
		if _, ok := registry[name]; ok {
			want[name] = "built"
		}
	}
	for _, p := range plugins.DefaultPlugins().MultiPoint.Enabled {
		if p.Name != "UnsupportedFeatures" {
			want[p.Name] = "built"
		}
	}
	if diff := cmp.Diff(want, documented); diff != "" {
		t.Errorf("docs/compatibility.md's plugin table does not match the registry (-registry +doc):\n%s", diff)
	}
}

// TestInstallListsSampleProfiles keeps the `--samples` row of
// docs/install.md in step with the profiles make run-local applies: those
// of config/samples, read as the run reads them.
func TestInstallListsSampleProfiles(t *testing.T) {
	root := testenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `--samples` \\|.*\\(profiles (.*)\\) \\|$").FindSubmatch(data)
	if row == nil {
		t.Fatal("docs/install.md has no `--samples` row naming the profiles")
	}
	var documented []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllSubmatch(row[1], -1) {
		documented = append(documented, string(m[1]))
	}
	objs, err := localcluster.ReadManifests(filepath.Join(root, "config", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	var applied []string
	for _, obj := range objs {
		applied = append(applied, obj.GetName())
	}
	if diff := cmp.Diff(applied, documented, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("profiles in docs/install.md (-applied +documented):\n%s", diff)
	}
}

// TestValidateExample keeps docs/validate.md's example true: validate's
// output on the policy directory it describes, line for line.
func TestValidateExample(t *testing.T) {
	root := testenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "docs", "validate.md"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(root, "internal", "cli", "testdata"))
	var stdout, stderr bytes.Buffer
	if code := cli.Validate(context.Background(), []string{"policy/"}, cli.Streams{In: strings.NewReader(""), Out: &stdout, Err: &stderr}); code != cli.ExitRefused {
		t.Errorf("exit code %d, want %d", code, cli.ExitRefused)
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()+stderr.String()), "\n") {
		if !strings.Contains(string(data), "\n"+line+"\n") {
			t.Errorf("docs/validate.md does not show the line\n%s", line)
		}
	}
}

// fixedServerVersion answers the operator's version check with info.
type fixedServerVersion apimachineryversion.Info

func (v fixedServerVersion) ServerVersionWithContext(context.Context) (*apimachineryversion.Info, error) {
	info := apimachineryversion.Info(v)
	return &info, nil
}

// TestDocumentedVersions keeps the versions docs/install.md and
// docs/compatibility.md state in step with the operator's version check
// and the control plane the tests run on: the supported API servers, the
// event an older one gets, worded as the check words it, and the version
// tested against.
func TestDocumentedVersions(t *testing.T) {
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	install, compatibility := read("install.md"), read("compatibility.md")
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }

	sched := version.MustParseGeneric(operator.SchedulerVersion)
	supported := fmt.Sprintf("kube-apiserver %d.%d and %d.%d", sched.Major(), sched.Minor(), sched.Major(), sched.Minor()+1)
	if !strings.Contains(flat(install), "**"+supported+"**") {
		t.Errorf("docs/install.md does not state the supported API servers, %s", supported)
	}
	if !strings.Contains(flat(compatibility), supported) {
		t.Errorf("docs/compatibility.md does not state the supported API servers, %s", supported)
	}
	tested := "kube-apiserver and kube-controller-manager " + localcluster.KubernetesVersion
	for name, doc := range map[string]string{"install.md": install, "compatibility.md": compatibility} {
		if !strings.Contains(flat(doc), tested) {
			t.Errorf("docs/%s does not say it is tested against %s", name, tested)
		}
	}

	recorder := events.NewFakeRecorder(1)
	older := fixedServerVersion{Major: "1", Minor: "36", GitVersion: "v1.36.3"}
	regarding := &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: "default"}
	if _, err := operator.CheckAPIServerVersion(context.Background(), older, recorder, regarding, sched); err != nil {
		t.Fatal(err)
	}
	note := strings.TrimPrefix(<-recorder.Events, "Warning "+operator.ReasonUnsupportedAPIServerVersion+" ")
	if !strings.Contains(install, "\n"+note+"\n") {
		t.Errorf("docs/install.md does not show the event's note\n%s", note)
	}
}
