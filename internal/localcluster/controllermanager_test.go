package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestControllerManagerArgs(t *testing.T) {
	tests := []struct {
		name   string
		config ControllerManagerConfig
		want   []string
	}{
		{
			name:   "volume controllers by default",
			config: ControllerManagerConfig{Kubeconfig: "/tmp/kcm/kubeconfig"},
			want: []string{
				"--kubeconfig=/tmp/kcm/kubeconfig",
				"--controllers=persistentvolume-binder-controller,ephemeral-volume-controller,persistentvolume-protection-controller,persistentvolumeclaim-protection-controller,garbage-collector-controller",
				"--use-service-account-credentials=false",
				"--leader-elect=false",
				"--secure-port=0",
				"--bind-address=127.0.0.1",
				"--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
			},
		},
		{
			name: "all controllers, with the token signing key and root CA",
			config: ControllerManagerConfig{
				Kubeconfig:            "/tmp/kcm/kubeconfig",
				Controllers:           AllControllers(),
				ServiceAccountKeyFile: "/tmp/api/sa-signer.key",
				RootCAFile:            "/tmp/kcm/root-ca.crt",
			},
			want: []string{
				"--kubeconfig=/tmp/kcm/kubeconfig",
				"--controllers=persistentvolume-binder-controller,ephemeral-volume-controller,persistentvolume-protection-controller,persistentvolumeclaim-protection-controller,garbage-collector-controller," +
					"deployment-controller,replicaset-controller,statefulset-controller,job-controller,cronjob-controller,daemonset-controller," +
					"disruption-controller,pod-garbage-collector-controller,ttl-after-finished-controller," +
					"namespace-controller,serviceaccount-controller,serviceaccount-token-controller," +
					"resourceclaim-controller,device-taint-eviction-controller,podgroup-protection-controller",
				"--use-service-account-credentials=false",
				"--leader-elect=false",
				"--secure-port=0",
				"--bind-address=127.0.0.1",
				"--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
				"--service-account-private-key-file=/tmp/api/sa-signer.key",
				"--root-ca-file=/tmp/kcm/root-ca.crt",
			},
		},
		{
			name:   "controllers as given",
			config: ControllerManagerConfig{Kubeconfig: "k", Controllers: []string{"*", "-node-lifecycle-controller"}},
			want: []string{
				"--kubeconfig=k",
				"--controllers=*,-node-lifecycle-controller",
				"--use-service-account-credentials=false",
				"--leader-elect=false",
				"--secure-port=0",
				"--bind-address=127.0.0.1",
				"--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ControllerManagerArgs(tt.config)); diff != "" {
				t.Errorf("ControllerManagerArgs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStartControllerManagerWithoutBinary(t *testing.T) {
	dir := t.TempDir()
	cm, err := StartControllerManager(dir, ControllerManagerConfig{Kubeconfig: "kubeconfig"}, nil)
	if err == nil {
		_ = cm.Stop()
		t.Fatal("started kube-controller-manager from an empty directory")
	}
	for _, want := range []string{dir, "make control-plane"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func TestControllerManagerErrQuotesItsLastOutput(t *testing.T) {
	dir := t.TempDir()
	// A stand-in that fails as kube-controller-manager does on a name it
	// does not know, after more output than Err quotes.
	script := "#!/bin/sh\nprintf '%05000d\\n' 0\necho '\"foo-controller\" is not in the list of known controllers' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "kube-controller-manager"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cm, err := StartControllerManager(dir, ControllerManagerConfig{Kubeconfig: "kubeconfig", Controllers: []string{"foo-controller"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-cm.Exited():
	case <-time.After(30 * time.Second):
		_ = cm.Stop()
		t.Fatal("the stand-in did not exit")
	}
	err = cm.Err()
	if err == nil {
		t.Fatal("Err is nil after the process failed")
	}
	for _, want := range []string{"exit status 1", `"foo-controller" is not in the list of known controllers`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Err %q does not say %q", err, want)
		}
	}
	if len(err.Error()) > controllerManagerTail+100 {
		t.Errorf("Err quotes %d bytes, more than the last %d of the output", len(err.Error()), controllerManagerTail)
	}
}
