package localcluster

import (
	"os"
	"regexp"
	"testing"
)

// TestKubernetesVersionIsBuilt keeps KubernetesVersion, which the local run
// reports and the test suites look up the cached binaries by, the version
// hack/build-control-plane.sh builds by default.
func TestKubernetesVersionIsBuilt(t *testing.T) {
	data, err := os.ReadFile("../../hack/build-control-plane.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^K8S_VERSION=\$\{K8S_VERSION:-([^}]+)\}$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("hack/build-control-plane.sh sets no K8S_VERSION default")
	}
	if got := string(m[1]); got != KubernetesVersion {
		t.Errorf("hack/build-control-plane.sh builds %s by default, KubernetesVersion is %s", got, KubernetesVersion)
	}
}
