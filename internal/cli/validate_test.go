package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
)

// profile is a SchedulingProfile manifest with the given spec, indented
// under spec.
func profile(name, spec string) string {
	m := fmt.Sprintf("apiVersion: scheduling.schedprofiles.io/v1alpha1\nkind: SchedulingProfile\nmetadata:\n  name: %s\n", name)
	if spec != "" {
		m += "spec:\n  " + strings.ReplaceAll(strings.TrimSpace(spec), "\n", "\n  ") + "\n"
	}
	return m
}

// run runs validate in dir with args and returns its exit code, output and
// summary.
func run(t *testing.T, dir, stdin string, args ...string) (int, string, string) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	defer t.Chdir(wd)
	var stdout, stderr bytes.Buffer
	code := Validate(context.Background(), args, Streams{In: strings.NewReader(stdin), Out: &stdout, Err: &stderr})
	return code, stdout.String(), stderr.String()
}

func TestValidate(t *testing.T) {
	bigArgs := fmt.Sprintf("pluginConfig:\n- name: NodeResourcesFit\n  args:\n    note: %q", strings.Repeat("x", profilebuild.MaxSpecBytes))
	for _, tt := range []struct {
		name  string
		files map[string]string
		stdin string
		args  []string

		wantCode    int
		wantOut     string
		wantSummary string
	}{{
		name:        "a valid profile",
		files:       map[string]string{"p.yaml": profile("gpu", "percentageOfNodesToScore: 50")},
		args:        []string{"p.yaml"},
		wantSummary: "1 SchedulingProfiles checked, 0 refused; 0 documents malformed; 0 documents of other kinds skipped",
	}, {
		name: "other kinds, comments and non-manifests are skipped",
		files: map[string]string{
			"policy/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [gpu.yaml]\n",
			"policy/gpu.yaml":           "# The GPU profile.\n---\n" + profile("gpu", "") + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
			"policy/README.md":          "not: [yaml",
			"policy/.github/ci.yaml":    "not: [yaml",
			"policy/list.yml":           "- a\n- b\n",
		},
		args:        []string{"policy"},
		wantSummary: "1 SchedulingProfiles checked, 0 refused; 0 documents malformed; 3 documents of other kinds skipped",
	}, {
		name: "strict decoding",
		files: map[string]string{"p.yaml": profile("unknown", `plugins:
  score:
    enabled:
    - name: NodeResourcesFit
      wieght: 2`) + "---\n" + profile("duplicate", "percentageOfNodesToScore: 10\npercentageOfNodesToScore: 20") +
			"---\n" + profile("mistyped", "percentageOfNodesToScore: all")},
		args: []string{"p.yaml"},
		wantOut: `p.yaml:1: unknown: strict decoding error: unknown field "spec.plugins.score.enabled[0].wieght"
p.yaml:2: malformed YAML: yaml: unmarshal errors: line 18: key "percentageOfNodesToScore" already set in map
p.yaml:3: mistyped: json: cannot unmarshal string into Go struct field SchedulingProfileSpec.spec.percentageOfNodesToScore of type int32
`,
		wantCode:    ExitRefused,
		wantSummary: "2 SchedulingProfiles checked, 2 refused; 1 documents malformed; 0 documents of other kinds skipped",
	}, {
		name: "the CRD's schema and rules",
		files: map[string]string{"p.yaml": profile("range", "percentageOfNodesToScore: 101") + "---\n" + profile("pattern", "schedulerName: GPU") + "---\n" +
			profile("dotted.name", "") + "---\n" + profile("dotted.name.with.scheduler-name", "schedulerName: gpu")},
		args: []string{"p.yaml"},
		wantOut: `p.yaml:1: range: spec.percentageOfNodesToScore: Invalid value: 101: spec.percentageOfNodesToScore in body should be less than or equal to 100
p.yaml:2: pattern: spec.schedulerName: Invalid value: "GPU": spec.schedulerName in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
p.yaml:3: dotted.name: <nil>: Invalid value: metadata.name is used as the schedulerName when spec.schedulerName is unset, so it must then be a DNS-1123 label
`,
		wantCode:    ExitRefused,
		wantSummary: "4 SchedulingProfiles checked, 3 refused; 0 documents malformed; 0 documents of other kinds skipped",
	}, {
		name: "apiVersion, name and YAML",
		files: map[string]string{"p.yaml": strings.Replace(profile("old", ""), "v1alpha1", "v1beta1", 1) + "---\n" +
			"apiVersion: scheduling.schedprofiles.io/v1alpha1\nkind: SchedulingProfile\nmetadata:\n  generateName: gpu-\n---\nkind: [\n---\n" +
			"kind: SchedulingProfile\nmetadata:\n  name: versionless\n---\napiVersion: other.example/v1\nkind: SchedulingProfile\nmetadata:\n  name: other\n"},
		args: []string{"p.yaml"},
		wantOut: `p.yaml:1: old: apiVersion scheduling.schedprofiles.io/v1beta1 is not served: SchedulingProfile is scheduling.schedprofiles.io/v1alpha1
p.yaml:2: metadata.name: Required value: kubectl apply needs a name
p.yaml:3: malformed YAML: yaml: line 11: did not find expected node content
p.yaml:4: versionless: apiVersion: Required value: SchedulingProfile is scheduling.schedprofiles.io/v1alpha1
`,
		wantCode:    ExitRefused,
		wantSummary: "3 SchedulingProfiles checked, 3 refused; 1 documents malformed; 1 documents of other kinds skipped",
	}, {
		name: "what the operator refuses",
		files: map[string]string{"p.yaml": profile("default-scheduler", "") + "---\n" + profile("unknown-plugin", `plugins:
  multiPoint:
    enabled:
    - name: NoSuchPlugin`) + "---\n" + profile("extender", `extenders:
- urlPrefix: https://extender.example
  filterVerb: filter`) + "---\n" + profile("big", bigArgs)},
		args: []string{"p.yaml"},
		wantOut: fmt.Sprintf(`p.yaml:1: default-scheduler: schedulerName default-scheduler is reserved for another scheduler; choose another name
p.yaml:2: unknown-plugin: cannot be built: MultiPoint plugin "NoSuchPlugin": no such plugin is registered
p.yaml:3: extender: cannot be built: Extenders: extenders[0].urlPrefix: Forbidden: the operator allows no extenders; a cluster admin allows them by URL prefix with the operator's --allowed-extender-url-prefixes flag
p.yaml:4: big: is %d bytes as JSON, more than the %d bytes a profile spec may have; split it or shorten the plugin args
p.yaml:4: big: cannot be built: PluginConfig plugin "NodeResourcesFit": decoding args: unknown field "note"
`, len(`{"pluginConfig":[{"name":"NodeResourcesFit","args":{"note":""}}]}`)+profilebuild.MaxSpecBytes, profilebuild.MaxSpecBytes),
		wantCode:    ExitRefused,
		wantSummary: "4 SchedulingProfiles checked, 4 refused; 0 documents malformed; 0 documents of other kinds skipped",
	}, {
		name: "the operator's flags",
		files: map[string]string{"p.yaml": profile("default-scheduler", "") + "---\n" + profile("extender", `extenders:
- urlPrefix: https://extender.example/scheduler
  filterVerb: filter`)},
		args:        []string{"--reserved-scheduler-names=", "--allowed-extender-url-prefixes=https://extender.example", "p.yaml"},
		wantSummary: "2 SchedulingProfiles checked, 0 refused; 0 documents malformed; 0 documents of other kinds skipped",
	}, {
		name:        "a List, as kubectl get -o yaml writes",
		files:       map[string]string{"list.yaml": "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(profile("a", ""), "\n", "\n  ") + "\n- " + strings.ReplaceAll(profile("default-scheduler", ""), "\n", "\n  ")},
		args:        []string{"list.yaml"},
		wantOut:     "list.yaml:1: default-scheduler: schedulerName default-scheduler is reserved for another scheduler; choose another name\n",
		wantCode:    ExitRefused,
		wantSummary: "2 SchedulingProfiles checked, 1 refused; 0 documents malformed; 0 documents of other kinds skipped",
	}, {
		name:        "stdin",
		stdin:       profile("a", "") + "---\n" + profile("default-scheduler", ""),
		args:        []string{"-"},
		wantOut:     "<stdin>:2: default-scheduler: schedulerName default-scheduler is reserved for another scheduler; choose another name\n",
		wantCode:    ExitRefused,
		wantSummary: "2 SchedulingProfiles checked, 1 refused; 0 documents malformed; 0 documents of other kinds skipped",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				path := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			code, out, summary := run(t, dir, tt.stdin, tt.args...)
			if diff := cmp.Diff(tt.wantOut, out); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff("validate: "+tt.wantSummary+"\n", summary); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
		})
	}
}

func TestValidateCannotRun(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{name: "no path", args: nil, want: "Usage: profile-scheduler validate"},
		{name: "a missing path", args: []string{"missing.yaml"}, want: "validate: stat missing.yaml: no such file or directory\n"},
		{name: "an unknown flag", args: []string{"--bogus", "x"}, want: "flag provided but not defined: -bogus"},
		{name: "a bad flag value", args: []string{"--extender-max-reply-bytes=0", "x"}, want: "validate: --extender-max-reply-bytes must be between 1 and 67108864, got 0\n"},
		{name: "a bad extender prefix", args: []string{"--allowed-extender-url-prefixes=ftp://x", "x"}, want: `validate: --allowed-extender-url-prefixes: allowed extender URL prefix "ftp://x": must start with http:// or https://` + "\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, t.TempDir(), "", tt.args...)
			if code != ExitUsage || out != "" || !strings.HasPrefix(errOut, tt.want) {
				t.Errorf("got exit code %d, output %q, error output %q; want %d, no output, error output starting with %q", code, out, errOut, ExitUsage, tt.want)
			}
		})
	}
}
