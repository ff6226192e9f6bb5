package coscheduling

import (
	"testing"

	st "github.com/schedprofiles/profile-scheduler/scheduler/plugins/testing"
)

// TestSignPod: the plugin adds nothing to a pod's signature, so a profile
// running it still signs pods (and batches them) by its other plugins.
func TestSignPod(t *testing.T) {
	fwk := newEnv(t, envConfig{}).fwk
	pod := st.MakePod().Name("p").SchedulerName("s").Obj()
	if got, want := string(fwk.SignPod(t.Context(), pod)), `{"v1.Pod.Spec.SchedulerName":"s"}`; got != want {
		t.Errorf("SignPod = %q, want %q", got, want)
	}
}
