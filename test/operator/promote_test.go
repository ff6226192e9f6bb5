package operator_test

import (
	"bytes"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/schedprofiles/profile-scheduler/internal/cli"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
)

// promote runs `profile-scheduler promote` as the admin, returning its exit
// code and what it printed.
func promote(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := cli.Promote(ctx, append([]string{"--kubeconfig", kubectl.Kubeconfig, "--timeout", "30s"}, args...),
		cli.Streams{In: strings.NewReader(""), Out: &stdout, Err: &stderr})
	return code, stdout.String(), stderr.String()
}

var _ = Describe("promote", func() {
	It("makes the live profile serve exactly the spec the shadow evaluated, over a kubectl patch", func() {
		nodes("promote", 2, "4", "8Gi")
		apply("promote-live", profileManifest("promote-live", fitScoring("LeastAllocated")), "--server-side")
		serving("promote-live")
		// As the README does: another field manager owns this field now,
		// and an apply of the shadow's spec would leave it.
		kubectlOK("patch", "schedulingprofile", "promote-live", "--type=merge", "-p",
			`{"spec":{"pluginConfig":[{"name":"NodeResourcesFit","args":{"scoringStrategy":{"type":"MostAllocated"}}}]}}`)
		Eventually(func() int64 { return getProfile("promote-live").Status.ServingGeneration }).Should(BeNumerically(">=", 2))

		apply("promote-next", profileManifest("promote-next", `shadowOf: promote-live
plugins:
  score:
    disabled:
    - name: "*"
    enabled:
    - name: NodeResourcesFit
      weight: 2`))
		shadowing("promote-next")
		code, _, stderr := promote("promote-next")
		Expect(code).To(Equal(cli.ExitRefused))
		Expect(stderr).To(ContainSubstring("has evaluated no placement"))

		ns := namespace()
		boundNode(createPod(poolPod(ns, "p", "promote-live", "promote", "500m", "512Mi")))
		shadow := getProfile("promote-next")
		hash := profilebuild.SpecHash(&shadow.Spec)
		Eventually(func() bool {
			st := getProfile("promote-next").Status.Shadow
			return st != nil && st.Evaluated > 0 && st.SpecHash == hash && st.Generation == shadow.Generation
		}).Should(BeTrue())

		code, stdout, stderr := promote("promote-next")
		Expect(code).To(BeZero(), stderr)
		Expect(stdout).To(ContainSubstring("SchedulingProfile promote-live serves generation"))
		live := getProfile("promote-live")
		want := shadow.Spec.DeepCopy()
		want.ShadowOf = nil
		Expect(live.Spec).To(Equal(*want))
		Expect(live.Status.ServingSpecHash).To(Equal(hash))
		Expect(live.Status.ServingGeneration).To(Equal(live.Generation))

		// -o yaml is the manifest to commit, and promoting again changes nothing.
		code, stdout, stderr = promote("--dry-run", "-o", "yaml", "promote-next")
		Expect(code).To(BeZero(), stderr)
		Expect(stdout).To(ContainSubstring("name: promote-live"))
		Expect(stdout).NotTo(ContainSubstring("shadowOf"))
		Expect(stdout).NotTo(ContainSubstring("MostAllocated"))
		Expect(getProfile("promote-live").Generation).To(Equal(live.Generation))
	})
})
