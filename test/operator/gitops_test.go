package operator_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// argoHealthKey is the argocd-cm key of the SchedulingProfile health check.
const argoHealthKey = "resource.customizations.health.scheduling.schedprofiles.io_SchedulingProfile"

// argoHealthCheck is the health check docs/gitops.md gives for Argo CD,
// read from the argocd-cm ConfigMap of its YAML block.
func argoHealthCheck() string {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "gitops.md"))
	Expect(err).NotTo(HaveOccurred())
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(data, -1) {
		cm := &corev1.ConfigMap{}
		if yaml.Unmarshal(block[1], cm) == nil && cm.Name == "argocd-cm" {
			Expect(cm.Data).To(HaveKey(argoHealthKey))
			return cm.Data[argoHealthKey]
		}
	}
	Fail("docs/gitops.md has no argocd-cm ConfigMap")
	return ""
}

// gitopsView is what GitOps tools make of an object.
type gitopsView struct {
	// Kstatus and KstatusMessage are what Flux computes, with kstatus.
	Kstatus        status.Status
	KstatusMessage string
	// Argo and ArgoMessage are the health Argo CD's Lua check reports.
	Argo, ArgoMessage string
}

// viewOf computes what Flux and Argo CD (running script, as it does: the
// object as the global obj, only the libraries it opens) make of u.
func viewOf(u *unstructured.Unstructured, script string) gitopsView {
	GinkgoHelper()
	res, err := status.Compute(u)
	Expect(err).NotTo(HaveOccurred())
	view := gitopsView{Kstatus: res.Status, KstatusMessage: res.Message}
	if script == "" {
		return view
	}
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for name, open := range map[string]lua.LGFunction{lua.LoadLibName: lua.OpenPackage, lua.BaseLibName: lua.OpenBase, lua.TabLibName: lua.OpenTable} {
		l.Push(l.NewFunction(open))
		l.Push(lua.LString(name))
		l.Call(1, 0)
	}
	l.SetGlobal("obj", luaValue(l, u.Object))
	Expect(l.DoString(script)).To(Succeed())
	hs, ok := l.Get(-1).(*lua.LTable)
	Expect(ok).To(BeTrue(), "the health check returned %v, not a table", l.Get(-1))
	view.Argo = lua.LVAsString(hs.RawGetString("status"))
	view.ArgoMessage = lua.LVAsString(hs.RawGetString("message"))
	return view
}

// luaValue converts an unstructured value as Argo CD does for obj.
func luaValue(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for k, item := range v {
			t.RawSetH(lua.LString(k), luaValue(l, item))
		}
		return t
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(luaValue(l, item))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	}
	return lua.LNil
}

// getUnstructured reads an object of obj's kind from the API server, as
// GitOps tools do: unstructured.
func getUnstructured(obj client.Object, ns, name string) *unstructured.Unstructured {
	GinkgoHelper()
	gvk, err := apiutil.GVKForObject(obj, k8sClient.Scheme())
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
	return u
}

// profileView is what Flux and, with script, Argo CD make of the named
// profile.
func profileView(name, script string) func() gitopsView {
	return func() gitopsView {
		return viewOf(getUnstructured(&schedulingv1alpha1.SchedulingProfile{}, "", name), script)
	}
}

func haveView(kstatus status.Status, argo string) OmegaMatcher {
	return And(HaveField("Kstatus", kstatus), HaveField("Argo", argo))
}

// slowBuildName is a Filter plugin of these tests whose every instance is
// built only when the test releases it, so that a profile's state while
// its new generation is built can be seen.
const slowBuildName = "TestSlowBuild"

type slowBuild struct{}

var _ framework.FilterPlugin = slowBuild{}

func (slowBuild) Name() string { return slowBuildName }

func (slowBuild) Filter(context.Context, *framework.CycleState, *corev1.Pod, *framework.NodeInfo) *framework.Status {
	return nil
}

// registerSlowBuild adds TestSlowBuild to a registry: each build takes one
// value from builds (or returns at once once builds is closed).
func registerSlowBuild(builds <-chan struct{}) func(runtime.Registry) error {
	return func(r runtime.Registry) error {
		return r.Register(slowBuildName, func(ctx context.Context, _ k8sruntime.Object, _ framework.Handle) (framework.Plugin, error) {
			select {
			case <-builds:
				return slowBuild{}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}, runtime.ArgsSpec{})
	}
}

var _ = Describe("What GitOps tools read", Ordered, func() {
	var (
		builds chan struct{}
		script string
	)
	BeforeAll(func() {
		builds = make(chan struct{})
		script = argoHealthCheck()
	})
	AfterAll(func() {
		// Whatever failed, no build stays blocked.
		close(builds)
		for _, name := range []string{"unseen", "slow", "steady", "steady-rival"} {
			kubectlOK("delete", "schedulingprofile", name, "--ignore-not-found")
		}
	})

	// release lets one build of TestSlowBuild through.
	release := func() {
		GinkgoHelper()
		Eventually(builds).Should(BeSent(struct{}{}))
	}
	slowSpec := func(extra string) string {
		return `plugins:
  filter:
    enabled:
    - name: ` + slowBuildName + extra
	}

	It("reads a profile no operator has seen yet as in progress", func() {
		stopOperator()
		apply("unseen", profileManifest("unseen", "{}"))
		view := profileView("unseen", script)()
		Expect(view).To(haveView(status.InProgressStatus, "Progressing"), "%+v", view)
		Expect(view.KstatusMessage).To(Equal("SchedulingProfile generation is 1, but latest observed generation is 0"))

		startOperator(registerSlowBuild(builds))
		Eventually(profileView("unseen", script)).Should(haveView(status.CurrentStatus, "Healthy"))
	})

	It("reads a generation being built as in progress, and kubectl wait waits for it", func() {
		apply("slow", profileManifest("slow", slowSpec("")))
		building := "Generation 1 is being built; no generation of this profile serves schedulerName slow yet"
		Eventually(profileView("slow", script)).Should(And(haveView(status.InProgressStatus, "Progressing"),
			HaveField("KstatusMessage", building), HaveField("ArgoMessage", building)))
		Expect(kubectlOK("get", "schedulingprofile", "slow")).To(MatchRegexp(`NAME\s+SCHEDULERNAME\s+READY\s+ACCEPTED\s+ACTIVE\s+AGE\nslow\s+slow\s+False\s+`))
		Consistently(profileView("slow", script), "1s").Should(haveView(status.InProgressStatus, "Progressing"))

		release()
		Eventually(profileView("slow", script)).Should(And(haveView(status.CurrentStatus, "Healthy"),
			HaveField("ArgoMessage", "Generation 1 serves schedulerName slow")))
		kubectlOK("wait", "--for=condition=Ready", "schedulingprofile/slow", "--timeout=30s")

		// The next generation: kubectl wait, started before the operator
		// has seen it, does not take generation 1's Ready for its own.
		apply("slow", profileManifest("slow", "percentageOfNodesToScore: 50\n"+slowSpec("")))
		waited := make(chan testenv.Result, 1)
		go func() {
			defer GinkgoRecover()
			r, err := kubectl.Run("wait", "--for=condition=Ready", "schedulingprofile/slow", "--timeout=60s")
			Expect(err).NotTo(HaveOccurred())
			waited <- r
		}()
		building = "Generation 2 is being built; generation 1 serves schedulerName slow until it is swapped in"
		Eventually(profileView("slow", script)).Should(And(haveView(status.InProgressStatus, "Progressing"),
			HaveField("KstatusMessage", building), HaveField("ArgoMessage", building)))
		Consistently(waited, "1s").ShouldNot(Receive())
		Expect(op.Profiles.Get("slow")).NotTo(BeNil(), "generation 1 keeps serving")

		release()
		Eventually(waited).Should(Receive(HaveField("Code", 0)))
		Expect(profileView("slow", script)()).To(haveView(status.CurrentStatus, "Healthy"))
		Expect(getProfile("slow").Status.ServingGeneration).To(BeEquivalentTo(2))
	})

	It("reads an invalid update as failed while the last valid generation serves, and as current once fixed", func() {
		apply("steady", profileManifest("steady", "{}"))
		Eventually(profileView("steady", script)).Should(haveView(status.CurrentStatus, "Healthy"))

		apply("steady", profileManifest("steady", `plugins:
  filter:
    enabled:
    - name: NoSuchPlugin`))
		const refused = `Generation 2 cannot be built: Filter plugin "NoSuchPlugin": no such plugin is registered; generation 1, the last valid one, keeps serving schedulerName steady`
		Eventually(profileView("steady", script)).Should(And(haveView(status.FailedStatus, "Degraded"),
			HaveField("KstatusMessage", refused), HaveField("ArgoMessage", refused)))
		Expect(profileCondition("steady", schedulingv1alpha1.ProfileActive)()).To(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonServing))

		r, err := kubectl.Run("wait", "--for=condition=Ready", "schedulingprofile/steady", "--timeout=1s")
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Code).NotTo(BeZero(), "kubectl wait for Ready of a refused generation:\n%s%s", r.Stdout, r.Stderr)
		kubectlOK("wait", "--for=condition=Stalled", "schedulingprofile/steady", "--timeout=10s")

		apply("steady", profileManifest("steady", "percentageOfNodesToScore: 50"))
		Eventually(profileView("steady", script)).Should(And(haveView(status.CurrentStatus, "Healthy"),
			HaveField("ArgoMessage", "Generation 3 serves schedulerName steady")))
		kubectlOK("wait", "--for=condition=Ready", "schedulingprofile/steady", "--timeout=10s")
	})

	It("reads a schedulerName another profile holds as failed", func() {
		apply("steady-rival", profileManifest("steady-rival", "schedulerName: steady"))
		const conflict = "schedulerName steady is claimed by the older SchedulingProfile steady; no generation of this profile serves"
		Eventually(profileView("steady-rival", script)).Should(And(haveView(status.FailedStatus, "Degraded"),
			HaveField("KstatusMessage", conflict), HaveField("ArgoMessage", conflict)))
		Expect(profileView("steady", script)()).To(haveView(status.CurrentStatus, "Healthy"))
	})

	It("reports a failing extender to Argo CD as Degraded, and leaves the rollout Current", func() {
		u := getUnstructured(&schedulingv1alpha1.SchedulingProfile{}, "", "steady")
		conds, _, err := unstructured.NestedSlice(u.Object, "status", "conditions")
		Expect(err).NotTo(HaveOccurred())
		const failing = "Calls to extenders of generation 3 fail; pods they see cannot be scheduled: https://extender.example: connection refused"
		conds = append(conds, map[string]any{
			"type": schedulingv1alpha1.ProfileExtendersReachable, "status": "False", "observedGeneration": u.GetGeneration(),
			"reason": schedulingv1alpha1.ReasonExtenderUnreachable, "message": failing,
		})
		Expect(unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")).To(Succeed())
		Expect(viewOf(u, script)).To(And(haveView(status.CurrentStatus, "Degraded"), HaveField("ArgoMessage", failing)))
	})

	It("reads a PodGroup as current whatever its phase: its members come later", func() {
		ns := namespace()
		podGroup(ns, "later", 3, nil)
		Eventually(func() podgroupv1alpha1.PodGroupPhase { return getPodGroup(ns, "later").Status.Phase }).Should(Equal(podgroupv1alpha1.PodGroupPending))
		view := viewOf(getUnstructured(&podgroupv1alpha1.PodGroup{}, ns, "later"), "")
		Expect(view.Kstatus).To(Equal(status.CurrentStatus), view.KstatusMessage)
	})
})
