package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSubcommands runs the built binary as CI and a migrating team would.
func TestSubcommands(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "profile-scheduler")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}

	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"-help"}, {"--leader-elect", "help"}} {
		t.Run(strings.Join(args, " ")+" prints the usage", func(t *testing.T) {
			code, help, errs := run("", args...)
			if code != 0 || errs != "" || !strings.Contains(help, "profile-scheduler validate [flags] PATH...") || !strings.Contains(help, "profile-scheduler convert [flags] FILE") || !strings.Contains(help, "-leader-elect") {
				t.Errorf("exit code %d, standard error %q, help:\n%s", code, errs, help)
			}
		})
	}

	t.Run("an unknown command starts nothing", func(t *testing.T) {
		code, out, errs := run("", "hepl")
		if want := "profile-scheduler: unknown command \"hepl\": the subcommands are validate, convert and help\n"; code != 2 || out != "" || errs != want {
			t.Errorf("exit code %d, output %q, standard error %q", code, out, errs)
		}
	})

	t.Run("a bad flag starts nothing", func(t *testing.T) {
		code, _, errs := run("", "--no-such-flag")
		if code != 2 || !strings.HasPrefix(errs, "flag provided but not defined: -no-such-flag\nUsage:") {
			t.Errorf("exit code %d, standard error %q", code, errs)
		}
	})

	t.Run("validate refuses the bad file of a directory", func(t *testing.T) {
		policy := filepath.Join(dir, "policy")
		files := map[string]string{
			"good.yaml": "apiVersion: scheduling.schedprofiles.io/v1alpha1\nkind: SchedulingProfile\nmetadata:\n  name: good\n",
			"bad.yaml":  "apiVersion: scheduling.schedprofiles.io/v1alpha1\nkind: SchedulingProfile\nmetadata:\n  name: bad\nspec:\n  plugins:\n    multiPoint:\n      enabled:\n      - name: NoSuchPlugin\n",
		}
		if err := os.Mkdir(policy, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(policy, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		code, out, summary := run("", "validate", policy)
		want := filepath.Join(policy, "bad.yaml") + `:1: bad: cannot be built: MultiPoint plugin "NoSuchPlugin": no such plugin is registered` + "\n"
		if diff := cmp.Diff(want, out); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
		if code != 1 || summary != "validate: 2 SchedulingProfiles checked, 1 refused; 0 documents malformed; 0 documents of other kinds skipped\n" {
			t.Errorf("exit code %d, summary %q", code, summary)
		}
	})

	t.Run("convert's output passes validate", func(t *testing.T) {
		code, out, notes := run("", "convert", "internal/cli/testdata/convert/plugin-args.yaml")
		if code != 0 {
			t.Fatalf("convert exited %d:\n%s", code, notes)
		}
		if code, findings, summary := run(out, "validate", "-"); code != 0 {
			t.Errorf("validate exited %d:\n%s%s", code, findings, summary)
		}
	})
}
