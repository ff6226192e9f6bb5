// Package kubectl_test runs the real kubectl binary with the project's
// kubectl-approve and kubectl-reject plugins against a real API server with
// the approver role and the decidedBy admission policy installed.
package kubectl_test

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

var (
	env         *envtest.Environment
	adminClient client.Client
	// aliceClient acts as alice, who holds the approver role.
	aliceClient client.Client
	// kubectls by user name.
	kubectls = map[string]*testenv.Kubectl{}
)

func TestKubectlPlugins(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kubectl plugins suite")
}

var _ = BeforeSuite(func() {
	// An admission policy takes a moment to become active after it is created.
	SetDefaultEventuallyTimeout(30 * time.Second)
	pluginDir := GinkgoT().TempDir()
	Expect(testenv.BuildKubectlPlugins(pluginDir)).To(Succeed())

	var err error
	env, err = testenv.New()
	Expect(err).NotTo(HaveOccurred())
	cfg, err := env.Start()
	Expect(err).NotTo(HaveOccurred())
	adminClient, err = client.New(cfg, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())

	dir := GinkgoT().TempDir()
	for _, u := range []envtest.User{
		{Name: "admin", Groups: []string{"system:masters"}},
		{Name: "alice", Groups: []string{"approvers"}},
		{Name: "bob"},
	} {
		user, err := env.AddUser(u, nil)
		Expect(err).NotTo(HaveOccurred())
		data, err := user.KubeConfig()
		Expect(err).NotTo(HaveOccurred())
		path, err := testenv.WriteKubeconfig(dir, u.Name, data)
		Expect(err).NotTo(HaveOccurred())
		kubectls[u.Name], err = testenv.NewKubectl(path, pluginDir)
		Expect(err).NotTo(HaveOccurred())
		if u.Name == "alice" {
			aliceClient, err = client.New(user.Config(), client.Options{Scheme: env.Scheme})
			Expect(err).NotTo(HaveOccurred())
		}
	}

	// Install what config/ ships for approvals, as a user would.
	root := testenv.RepoRoot()
	run("admin", "apply", "-f", filepath.Join(root, "config", "rbac", "approver_role.yaml"))
	run("admin", "create", "clusterrolebinding", "approvers", "--clusterrole=approver", "--group=approvers")
	run("admin", "apply", "-k", filepath.Join(root, "config", "policy"))
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// kubectlAs runs kubectl as user with the plugins on PATH.
func kubectlAs(user string, args ...string) testenv.Result {
	GinkgoHelper()
	r, err := kubectls[user].Run(args...)
	Expect(err).NotTo(HaveOccurred())
	return r
}

// run is kubectlAs that must succeed.
func run(user string, args ...string) string {
	GinkgoHelper()
	r := kubectlAs(user, args...)
	Expect(r.Code).To(BeZero(), "kubectl %v: %s%s", args, r.Stdout, r.Stderr)
	return r.Stdout
}
