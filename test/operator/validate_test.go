package operator_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/cli"
)

// `profile-scheduler validate` and the controller judge a spec through
// the same validation: what validate prints after the profile's name is
// what status says after "Generation N".
var _ = Describe("profile-scheduler validate", func() {
	DescribeTable("refuses a spec with the message status gives",
		func(name, spec string) {
			manifest := profileManifest(name, spec)
			file := filepath.Join(manifests, "validate-"+name+".yaml")
			Expect(os.WriteFile(file, []byte(manifest), 0o644)).To(Succeed())
			var stdout, stderr bytes.Buffer
			code := cli.Validate(context.Background(), []string{file}, cli.Streams{In: strings.NewReader(""), Out: &stdout, Err: &stderr})
			Expect(code).To(Equal(cli.ExitRefused), stderr.String())
			prefix := fmt.Sprintf("%s:1: %s: ", file, name)
			Expect(stdout.String()).To(HavePrefix(prefix))
			Expect(strings.Count(stdout.String(), "\n")).To(Equal(1), stdout.String())
			message := strings.TrimSuffix(strings.TrimPrefix(stdout.String(), prefix), "\n")

			apply(name, manifest)
			Eventually(profileCondition(name, schedulingv1alpha1.ProfileAccepted)).Should(
				HaveField("Message", Equal("Generation 1 "+message)))
			kubectlOK("delete", "schedulingprofile", name)
		},
		Entry("an unknown plugin", "validate-unknown", `plugins:
  multiPoint:
    enabled:
    - name: NoSuchPlugin`),
		Entry("args the plugin refuses", "validate-args", `pluginConfig:
- name: NodeResourcesFit
  args:
    scoringStrategy:
      type: Sideways`),
		Entry("an extender at a URL the flags do not allow", "validate-extender", `extenders:
- urlPrefix: https://extender.example
  filterVerb: filter`),
	)
})
