package operator_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
)

// webhookLabel marks the profiles the suite's webhook judges (suite_test.go).
const webhookLabel = "webhook-test"

// webhookDenial is how kubectl and the client report the webhook's refusal.
const webhookDenial = `admission webhook "vschedulingprofile.scheduling.schedprofiles.io" denied the request: `

// judgedManifest is a profile the webhook judges.
func judgedManifest(name, spec string) string {
	return strings.Replace(profileManifest(name, spec), "  name: "+name+"\n", "  name: "+name+"\n  labels:\n    "+webhookLabel+": \"true\"\n", 1)
}

// applyResult writes a manifest and applies it with kubectl, returning
// what kubectl said, success or not.
func applyResult(name, manifest string, extraArgs ...string) (stdout, stderr string, code int) {
	GinkgoHelper()
	file := filepath.Join(manifests, name+".yaml")
	Expect(os.WriteFile(file, []byte(manifest), 0o644)).To(Succeed())
	r, err := kubectl.Run(append([]string{"apply", "-f", file}, extraArgs...)...)
	Expect(err).NotTo(HaveOccurred())
	return r.Stdout, r.Stderr, r.Code
}

func profileAbsent(name string) {
	GinkgoHelper()
	err := k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, &schedulingv1alpha1.SchedulingProfile{})
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "SchedulingProfile %s: %v", name, err)
}

var _ = Describe("The admission webhook", func() {
	ctx := context.Background()

	// Each spec is applied twice: unlabelled, the webhook lets it through
	// and the controller refuses it in status; labelled, the webhook
	// refuses it at apply, server-side dry run and diff with the same
	// message.
	DescribeTable("refuses at apply, dry run and diff an invalid profile with the message its status would show",
		func(name, spec string) {
			apply(name+"-status", profileManifest(name+"-status", "schedulerName: "+name+"\n"+spec))
			Eventually(profileCondition(name+"-status", schedulingv1alpha1.ProfileAccepted)).Should(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec))
			status := profileCondition(name+"-status", schedulingv1alpha1.ProfileAccepted)().Message
			Expect(status).To(HavePrefix("Generation 1 cannot be built: "))
			want := webhookDenial + "SchedulingProfile " + name + " " + strings.TrimPrefix(status, "Generation 1 ")

			manifest := judgedManifest(name, "schedulerName: "+name+"\n"+spec)
			_, stderr, code := applyResult(name, manifest, "--dry-run=server")
			Expect(code).NotTo(BeZero())
			Expect(stderr).To(ContainSubstring(want))
			_, stderr, code = applyResult(name, manifest)
			Expect(code).NotTo(BeZero())
			Expect(stderr).To(ContainSubstring(want))
			profileAbsent(name)
			// kubectl diff dry-runs the apply on the server.
			r, err := kubectl.Run("diff", "-f", filepath.Join(manifests, name+".yaml"))
			Expect(err).NotTo(HaveOccurred())
			Expect(r.Code).To(BeNumerically(">", 1), "kubectl diff reports an error, not a difference")
			Expect(r.Stderr).To(ContainSubstring(want))
		},
		Entry("an unknown plugin", "unknown-plugin", `plugins:
  filter:
    enabled:
    - name: NoSuchPlugin`),
		Entry("args the plugin refuses", "bad-args", `pluginConfig:
- name: NodeResourcesFit
  args:
    scoringStrategy:
      type: NoSuchStrategy`),
		Entry("an args field the plugin does not have", "unknown-args-field", `pluginConfig:
- name: NodeResourcesFit
  args:
    noSuchField: true`),
		Entry("an extender at a URL the operator does not allow", "extender-not-allowed", `extenders:
- urlPrefix: http://127.0.0.1:1/scheduler
  filterVerb: filter`),
	)

	It("leaves a malformed manifest and an unknown field of the object to kubectl and the API server", func() {
		_, stderr, code := applyResult("malformed", judgedManifest("malformed", "plugins: [unclosed"))
		Expect(code).NotTo(BeZero())
		Expect(stderr).To(ContainSubstring("error converting YAML to JSON"))
		profileAbsent("malformed")
		// kubectl asks for strict field validation by default.
		_, stderr, code = applyResult("unknown-field", judgedManifest("unknown-field", "pluginz: {}"))
		Expect(code).NotTo(BeZero())
		Expect(stderr).To(ContainSubstring(`unknown field "spec.pluginz"`))
		profileAbsent("unknown-field")
	})

	It("refuses a spec over the size limit, as status does", func() {
		huge := largeProfile("huge-judged", profilebuild.MaxSpecBytes+50_000)
		huge.Labels = map[string]string{webhookLabel: "true"}
		err := k8sClient.Create(ctx, huge.DeepCopy(), client.DryRunAll)
		Expect(err).To(MatchError(ContainSubstring(webhookDenial + "SchedulingProfile huge-judged is ")))
		Expect(err).To(MatchError(ContainSubstring(fmt.Sprintf("more than the %d bytes a profile spec may have", profilebuild.MaxSpecBytes))))
		Expect(k8sClient.Create(ctx, huge)).To(MatchError(ContainSubstring(webhookDenial)))
		profileAbsent("huge-judged")
	})

	It("lets a valid profile through, and warns of a schedulerName an older profile claims", func() {
		nodes("judged", 1, "4", "8Gi")
		stdout, stderr, code := applyResult("judged", judgedManifest("judged", fitScoring("MostAllocated")), "--dry-run=server")
		Expect(code).To(BeZero(), stderr)
		Expect(stdout).To(ContainSubstring("created (server dry run)"))
		profileAbsent("judged")
		_, stderr, code = applyResult("judged", judgedManifest("judged", fitScoring("MostAllocated")))
		Expect(code).To(BeZero(), stderr)
		Expect(stderr).To(BeEmpty())
		serving("judged")

		_, stderr, code = applyResult("judged-second", judgedManifest("judged-second", "schedulerName: judged"))
		Expect(code).To(BeZero(), stderr)
		Expect(stderr).To(ContainSubstring("Warning: schedulerName judged is claimed by the older SchedulingProfile judged"))
		Eventually(profileCondition("judged-second", schedulingv1alpha1.ProfileAccepted)).Should(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonSchedulerNameConflict))
	})

	It("lets metadata change on a profile the operator's plugins no longer build, and refuses a spec change", func() {
		stopOperator()
		startOperator(registerTestGate)
		DeferCleanup(func() {
			stopOperator()
			startOperator()
		})
		spec := `plugins:
  permit:
    enabled:
    - name: TestGate`
		apply("outgrown", judgedManifest("outgrown", spec))
		serving("outgrown")
		stopOperator()
		startOperator()

		kubectlOK("label", "schedulingprofile", "outgrown", "team=platform")
		kubectlOK("annotate", "schedulingprofile", "outgrown", "owner=alice")
		finalizers := func(list string) client.Patch {
			return client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":`+list+`}}`))
		}
		Expect(k8sClient.Patch(ctx, getProfile("outgrown"), finalizers(`["example.com/keep"]`))).To(Succeed())
		Expect(k8sClient.Patch(ctx, getProfile("outgrown"), finalizers(`null`))).To(Succeed())

		_, stderr, code := applyResult("outgrown", judgedManifest("outgrown", spec+"\n    - name: PrioritySort"))
		Expect(code).NotTo(BeZero())
		Expect(stderr).To(ContainSubstring(webhookDenial + "SchedulingProfile outgrown cannot be built: "))
		Expect(stderr).To(ContainSubstring(`"TestGate": no such plugin is registered`))
		Expect(getProfile("outgrown").Generation).To(BeEquivalentTo(1))
	})

	It("refuses every change while no replica answers or the call times out, and what serves stays", func() {
		nodes("unanswered", 1, "4", "8Gi")
		apply("unanswered", judgedManifest("unanswered", fitScoring("MostAllocated")))
		serving("unanswered")
		stopOperator()
		DeferCleanup(func() {
			if stopOperator == nil {
				startOperator()
			}
		})

		_, stderr, code := applyResult("unanswered", judgedManifest("unanswered", fitScoring("LeastAllocated")))
		Expect(code).NotTo(BeZero())
		Expect(stderr).To(ContainSubstring(`failed calling webhook "vschedulingprofile.scheduling.schedprofiles.io"`))
		_, stderr, code = applyResult("while-down", judgedManifest("while-down", fitScoring("MostAllocated")))
		Expect(code).NotTo(BeZero())
		Expect(stderr).To(ContainSubstring(`failed calling webhook "vschedulingprofile.scheduling.schedprofiles.io"`))
		profileAbsent("while-down")

		By("timing out on a server that accepts connections and never answers")
		hung, err := net.Listen("tcp", net.JoinHostPort(env.WebhookInstallOptions.LocalServingHost, strconv.Itoa(env.WebhookInstallOptions.LocalServingPort)))
		Expect(err).NotTo(HaveOccurred())
		var conns []net.Conn
		accepted := make(chan struct{})
		go func() {
			defer close(accepted)
			for {
				c, err := hung.Accept()
				if err != nil {
					return
				}
				conns = append(conns, c)
			}
		}()
		start := time.Now()
		_, stderr, code = applyResult("unanswered", judgedManifest("unanswered", fitScoring("LeastAllocated")))
		Expect(code).NotTo(BeZero())
		Expect(stderr).To(ContainSubstring(`failed calling webhook "vschedulingprofile.scheduling.schedprofiles.io"`))
		Expect(stderr).To(ContainSubstring("timeout=10s"))
		Expect(time.Since(start)).To(BeNumerically(">=", 10*time.Second))
		Expect(hung.Close()).To(Succeed())
		<-accepted
		for _, c := range conns {
			Expect(c.Close()).To(Succeed())
		}

		startOperator()
		Eventually(func() bool { return op.Profiles.Get("unanswered") != nil }).Should(BeTrue())
		sp := getProfile("unanswered")
		Expect(sp.Generation).To(BeEquivalentTo(1))
		Expect(sp.Status.ServingGeneration).To(BeEquivalentTo(1))
		// A GitOps tool's retry goes through once a replica answers.
		Eventually(func() int {
			_, _, code := applyResult("while-down", judgedManifest("while-down", fitScoring("MostAllocated")))
			return code
		}).Should(BeZero())
	})
})
