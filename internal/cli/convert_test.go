package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func convertFile(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Convert(context.Background(), args, Streams{In: strings.NewReader(stdin), Out: &stdout, Err: &stderr})
	return code, stdout.String(), stderr.String()
}

// TestConvertRoundTrip converts upstream's example configurations and
// validates the result as a policy repository's CI would.
func TestConvertRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		file string
		// args are the operator's flags the converted profiles are
		// judged with, by convert and by validate alike.
		args      []string
		wantNotes string
	}{{
		file: "default.yaml",
		args: []string{"--reserved-scheduler-names="},
		wantNotes: `convert: leaderElection.leaderElect: set operator flag --leader-elect=true
convert: clientConnection.kubeconfig: set operator flag --kubeconfig=/etc/kubernetes/scheduler.conf
convert: profiles: none given; kube-scheduler then serves its default profile as default-scheduler, and so does the SchedulingProfile written for it
`,
	}, {
		file: "multi-profile.yaml",
		args: []string{"--reserved-scheduler-names="},
	}, {
		file: "plugin-args.yaml",
		wantNotes: `convert: parallelism: set operator flag --parallelism=8
convert: percentageOfNodesToScore: set operator flag --percentage-of-nodes-to-score=50
convert: leaderElection.leaderElect: set operator flag --leader-elect=true
convert: leaderElection.leaseDuration: set operator flag --leader-elect-lease-duration=30s
convert: leaderElection.resourceName: set operator flag --leader-election-id=my-scheduler
convert: leaderElection.resourceNamespace: set operator flag --leader-election-namespace=kube-system
convert: clientConnection.qps: set operator flag --kube-api-qps=100
convert: clientConnection.burst: set operator flag --kube-api-burst=200
convert: podInitialBackoffSeconds: no counterpart, not carried over: the operator's backoff is upstream's default, 1s initial
convert: podMaxBackoffSeconds: no counterpart, not carried over: the operator's backoff is upstream's default, 10s at most
`,
	}, {
		file: "extenders.yaml",
		args: []string{"--allowed-extender-url-prefixes=https://gpu-extender.kube-system.svc:8443"},
		wantNotes: `convert: extenders: copied into every profile's spec.extenders; set operator flag --allowed-extender-url-prefixes=https://gpu-extender.kube-system.svc:8443/scheduler
convert: SchedulingProfile gpu: extenders[0].tlsConfig.certFile, keyFile cannot be carried (a profile names no file of the operator's and publishes no key); certSecretRef names Secret gpu-extender-0-cert instead, to create and label for the profile: kubectl -n profile-scheduler-system create secret tls gpu-extender-0-cert --cert=/etc/scheduler/extender.crt --key=/etc/scheduler/extender.key && kubectl -n profile-scheduler-system label secret gpu-extender-0-cert scheduling.schedprofiles.io/extender-tls=gpu
convert: SchedulingProfile gpu: extenders[0].tlsConfig.caFile cannot be carried (a profile names no file of the operator's and publishes no key); caSecretRef names Secret gpu-extender-0-ca instead, to create and label for the profile: kubectl -n profile-scheduler-system create secret generic gpu-extender-0-ca --from-file=ca.crt=/etc/scheduler/ca.crt && kubectl -n profile-scheduler-system label secret gpu-extender-0-ca scheduling.schedprofiles.io/extender-tls=gpu
`,
	}} {
		t.Run(tt.file, func(t *testing.T) {
			code, out, notes := convertFile(t, "", append(tt.args, "testdata/convert/"+tt.file)...)
			if code != 0 {
				t.Errorf("convert exited %d:\n%s", code, notes)
			}
			if diff := cmp.Diff(tt.wantNotes, notes); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
			code, findings, summary := run(t, t.TempDir(), out, append(tt.args, "-")...)
			if code != 0 || findings != "" {
				t.Errorf("validate exited %d on\n%s\n%s%s", code, out, findings, summary)
			}
		})
	}
}

func TestConvertOutput(t *testing.T) {
	code, out, _ := convertFile(t, "", "testdata/convert/multi-profile.yaml")
	want := `apiVersion: scheduling.schedprofiles.io/v1alpha1
kind: SchedulingProfile
metadata:
  name: default-scheduler
---
apiVersion: scheduling.schedprofiles.io/v1alpha1
kind: SchedulingProfile
metadata:
  name: no-scoring-scheduler
spec:
  plugins:
    preScore:
      disabled:
      - name: '*'
    score:
      disabled:
      - name: '*'
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	// default-scheduler is kube-scheduler's unless the operator's flags
	// say otherwise: the manifest is written, and the refusal reported.
	if code != ExitRefused {
		t.Errorf("exit code %d, want %d", code, ExitRefused)
	}
}

func TestConvertRefusesWhatKubeSchedulerRefuses(t *testing.T) {
	const header = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
	for _, tt := range []struct {
		name, config, want string
	}{{
		name:   "an unknown field",
		config: header + "profiles:\n- schedulerName: a\n  plugin: {}\n",
		want:   `convert: <stdin>: strict decoding error: unknown field "profiles[0].plugin"` + "\n",
	}, {
		name:   "a field given twice",
		config: header + "parallelism: 1\nparallelism: 2\n",
		want:   `convert: <stdin>: malformed YAML: yaml: unmarshal errors: line 4: key "parallelism" already set in map` + "\n",
	}, {
		name:   "a version kube-scheduler no longer loads",
		config: "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
		want:   `convert: <stdin>: apiVersion "kubescheduler.config.k8s.io/v1beta3", kind "KubeSchedulerConfiguration": not a kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration` + "\n",
	}, {
		name:   "malformed YAML",
		config: header + "profiles: [\n",
		want:   "convert: <stdin>: malformed YAML: yaml: line 3: did not find expected node content\n",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := convertFile(t, tt.config, "-")
			if diff := cmp.Diff(tt.want, errOut); diff != "" {
				t.Errorf("error output (-want +got):\n%s", diff)
			}
			if code != ExitUsage || out != "" {
				t.Errorf("exit code %d, output %q; want %d and none", code, out, ExitUsage)
			}
		})
	}
}
