// Package kubectl_test runs the real kubectl binary with the project's
// kubectl-approve and kubectl-reject plugins against a real API server with
// the approver role and the decidedBy admission policy installed.
package kubectl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/coscheduling"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/manualapproval"
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

	// The profiles the WaitingPods of these specs are held by, shown
	// Active as the operator shows them (and as it makes them when it
	// runs): one running ManualApproval, one running Coscheduling too.
	servedProfile(manualProfile, "  plugins:\n    multiPoint:\n      enabled:\n      - name: ManualApproval", manualapproval.Name)
	servedProfile(gangsProfile, "  plugins:\n    multiPoint:\n      enabled:\n      - name: Coscheduling\n      - name: ManualApproval\n"+
		"    queueSort:\n      enabled:\n      - name: Coscheduling\n      disabled:\n      - name: \"*\"", coscheduling.Name, manualapproval.Name)
})

// Profiles the specs' pods name.
const (
	manualProfile = "manual"
	gangsProfile  = "gangs"
)

// servedProfile applies SchedulingProfile name with spec and writes the
// status the operator writes for it once it serves: Active, running permit
// at Permit.
func servedProfile(name, spec string, permit ...string) {
	GinkgoHelper()
	manifest := filepath.Join(GinkgoT().TempDir(), name+".yaml")
	Expect(os.WriteFile(manifest, []byte(fmt.Sprintf("apiVersion: scheduling.schedprofiles.io/v1alpha1\nkind: SchedulingProfile\nmetadata:\n  name: %s\nspec:\n%s\n", name, spec)), 0o644)).To(Succeed())
	run("admin", "apply", "-f", manifest)
	sp := &schedulingv1alpha1.SchedulingProfile{}
	Expect(adminClient.Get(context.Background(), client.ObjectKey{Name: name}, sp)).To(Succeed())
	sp.Status.SchedulerName = name
	sp.Status.ObservedGeneration = sp.Generation
	sp.Status.ServingGeneration = sp.Generation
	sp.Status.Plugins = &schedulingv1alpha1.ResolvedPlugins{}
	for _, p := range permit {
		sp.Status.Plugins.Permit = append(sp.Status.Plugins.Permit, schedulingv1alpha1.ResolvedPlugin{Name: p})
	}
	for _, t := range []string{schedulingv1alpha1.ProfileAccepted, schedulingv1alpha1.ProfileActive} {
		meta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: schedulingv1alpha1.ReasonServing, ObservedGeneration: sp.Generation})
	}
	Expect(adminClient.Status().Update(context.Background(), sp)).To(Succeed())
}

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
