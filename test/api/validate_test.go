package api_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/schedprofiles/profile-scheduler/internal/cli"
)

// `profile-scheduler validate` checks manifests against the CRD's schema
// and rules offline, with the API server's own code: it finds what the
// API server refuses, with the API server's messages.
var _ = Describe("profile-scheduler validate", func() {
	DescribeTable("refuses offline what the API server refuses, with its messages",
		func(name, spec string) {
			obj := profileFromSpec(name, spec)
			if spec == "" {
				unstructured.RemoveNestedField(obj.Object, "spec")
			}
			data, err := yaml.Marshal(obj.Object)
			Expect(err).NotTo(HaveOccurred())
			file := filepath.Join(GinkgoT().TempDir(), "profile.yaml")
			Expect(os.WriteFile(file, data, 0o644)).To(Succeed())
			var stdout, stderr bytes.Buffer
			code := cli.Validate(context.Background(), []string{file}, cli.Streams{In: strings.NewReader(""), Out: &stdout, Err: &stderr})
			Expect(code).To(Equal(cli.ExitRefused), "%s%s", stdout.String(), stderr.String())

			err = k8sClient.Create(context.Background(), obj)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			prefix := fmt.Sprintf("%s:1: %s: ", file, name)
			for _, line := range strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n") {
				Expect(line).To(HavePrefix(prefix))
				Expect(err.Error()).To(ContainSubstring(strings.TrimPrefix(line, prefix)))
			}
		},
		Entry("a negative plugin weight", "offline-weight", "plugins:\n  score:\n    enabled:\n    - name: NodeResourcesFit\n      weight: -1\n"),
		Entry("a schedulerName that is not a DNS-1123 label", "offline-scheduler-name", "schedulerName: Bin_Packing"),
		Entry("a name that cannot stand in for an unset schedulerName", "offline.example", "percentageOfNodesToScore: 50"),
		Entry("such a name without spec", "offline-no-spec.example", ""),
		Entry("two configs for one plugin", "offline-duplicate", "pluginConfig:\n- name: NodeResourcesFit\n  args: {}\n- name: NodeResourcesFit\n  args: {}\n"),
		Entry("a percentageOfNodesToScore above 100", "offline-percent", "percentageOfNodesToScore: 101"),
	)
})
