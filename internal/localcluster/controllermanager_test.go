package localcluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestControllerManagerArgs(t *testing.T) {
	want := []string{
		"--kubeconfig=/tmp/kcm/kubeconfig",
		"--controllers=persistentvolume-binder-controller,ephemeral-volume-controller,persistentvolume-protection-controller,persistentvolumeclaim-protection-controller,garbage-collector-controller",
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--secure-port=0",
		"--bind-address=127.0.0.1",
	}
	if diff := cmp.Diff(want, ControllerManagerArgs("/tmp/kcm/kubeconfig")); diff != "" {
		t.Errorf("ControllerManagerArgs (-want +got):\n%s", diff)
	}
}

func TestStartControllerManagerWithoutBinary(t *testing.T) {
	dir := t.TempDir()
	cm, err := StartControllerManager(dir, "kubeconfig", nil)
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
