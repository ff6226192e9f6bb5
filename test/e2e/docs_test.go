package e2e_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/schedprofiles/profile-scheduler/internal/cli"
	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
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
