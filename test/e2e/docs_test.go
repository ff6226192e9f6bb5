package e2e_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

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
