// Package kubectl_test runs the real kubectl binary with the project's
// kubectl-approve and kubectl-reject plugins against a real API server with
// the approver role and the decidedBy admission policy installed.
package kubectl_test

import (
	"bytes"
	"os"
	"os/exec"
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
	// kubeconfigs by user name.
	kubeconfigs = map[string]string{}
	// pluginDir holds the built kubectl plugins; it is put first on PATH.
	pluginDir string
	kubectl   string
)

func TestKubectlPlugins(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kubectl plugins suite")
}

var _ = BeforeSuite(func() {
	// An admission policy takes a moment to become active after it is created.
	SetDefaultEventuallyTimeout(30 * time.Second)
	var err error
	kubectl, err = exec.LookPath("kubectl")
	Expect(err).NotTo(HaveOccurred(), "these tests run the real kubectl binary; install kubectl")

	pluginDir = GinkgoT().TempDir()
	for _, name := range []string{"kubectl-approve", "kubectl-reject"} {
		build := exec.Command("go", "build", "-o", filepath.Join(pluginDir, name), "./cmd/"+name)
		build.Dir = testenv.RepoRoot()
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
	}

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
		path := filepath.Join(dir, u.Name+".kubeconfig")
		Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
		kubeconfigs[u.Name] = path
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

// result is what one kubectl invocation printed and how it exited.
type result struct {
	stdout, stderr string
	code           int
}

// kubectlAs runs kubectl as user with the plugins on PATH.
func kubectlAs(user string, args ...string) result {
	cmd := exec.Command(kubectl, args...)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+kubeconfigs[user],
		"PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if exitErr, ok := err.(*exec.ExitError); ok {
		r.code = exitErr.ExitCode()
	} else {
		Expect(err).NotTo(HaveOccurred())
	}
	return r
}

// run is kubectlAs that must succeed.
func run(user string, args ...string) string {
	GinkgoHelper()
	r := kubectlAs(user, args...)
	Expect(r.code).To(BeZero(), "kubectl %v: %s%s", args, r.stdout, r.stderr)
	return r.stdout
}
