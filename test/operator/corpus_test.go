package operator_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/controllers"
	"github.com/schedprofiles/profile-scheduler/internal/cli"
)

// corpusDir holds the differential corpus: SchedulingProfiles as users
// write them, each annotated with what the operator must say of it.
const corpusDir = "testdata/corpus"

// The annotations of a corpus profile.
const (
	// corpusVerdict is "admitted" or "refused": what the admission webhook
	// and `profile-scheduler validate` say.
	corpusVerdict = "corpus.schedprofiles.io/verdict"
	// corpusReason is the Accepted condition's reason of a refused one.
	corpusReason = "corpus.schedprofiles.io/reason"
	// corpusRefusals are the refusals of a refused one, one a line, as
	// validate prints them after the profile's name.
	corpusRefusals = "corpus.schedprofiles.io/refusals"
	// corpusStatusRefusals, when set, are the refusals status reports
	// instead: what only the cluster can tell (a missing Secret), or
	// fewer, where the file's comment says why.
	corpusStatusRefusals = "corpus.schedprofiles.io/status-refusals"
	// corpusPadBytes makes the test grow the first NodeAffinity
	// addedAffinity values list until the spec has that many bytes as
	// JSON: a profile over the size limit, without a file of that size.
	corpusPadBytes = "corpus.schedprofiles.io/pad-bytes"
)

// corpusProfile is one profile of the corpus and what is expected of it.
type corpusProfile struct {
	// file is what validate reads: the corpus file, or the padded copy.
	file     string
	profile  *schedulingv1alpha1.SchedulingProfile
	admitted bool
	reason   string
	// refusals are the webhook's and validate's, statusRefusals the
	// controller's.
	refusals, statusRefusals []string
}

// loadCorpusProfile reads a corpus file and its expectations.
func loadCorpusProfile(file string) corpusProfile {
	GinkgoHelper()
	data, err := os.ReadFile(file)
	Expect(err).NotTo(HaveOccurred())
	sp := &schedulingv1alpha1.SchedulingProfile{}
	Expect(yaml.UnmarshalStrict(data, sp)).To(Succeed())
	c := corpusProfile{file: file, profile: sp}
	ann := sp.Annotations
	switch ann[corpusVerdict] {
	case "admitted":
		c.admitted = true
		Expect(ann).NotTo(HaveKey(corpusRefusals), "%s: an admitted profile lists no refusals", file)
	case "refused":
		c.reason = ann[corpusReason]
		Expect(c.reason).NotTo(BeEmpty(), "%s: %s", file, corpusReason)
		c.refusals = lines(ann[corpusRefusals])
		Expect(c.refusals).NotTo(BeEmpty(), "%s: %s", file, corpusRefusals)
	default:
		Fail(fmt.Sprintf("%s: %s is %q, want admitted or refused", file, corpusVerdict, ann[corpusVerdict]))
	}
	c.statusRefusals = c.refusals
	if s, ok := ann[corpusStatusRefusals]; ok {
		c.statusRefusals = lines(s)
	}
	if s, ok := ann[corpusPadBytes]; ok {
		size, err := strconv.Atoi(s)
		Expect(err).NotTo(HaveOccurred())
		padAffinity(sp, size)
		out, err := yaml.Marshal(sp)
		Expect(err).NotTo(HaveOccurred())
		c.file = filepath.Join(manifests, "corpus-"+filepath.Base(file))
		Expect(os.WriteFile(c.file, out, 0o644)).To(Succeed())
	}
	return c
}

// lines splits an annotation into its non-empty lines.
func lines(s string) []string {
	return slices.DeleteFunc(strings.Split(s, "\n"), func(l string) bool { return strings.TrimSpace(l) == "" })
}

// padAffinity fills the values of the first match expression of
// NodeAffinity's addedAffinity until sp's spec has at least size bytes
// as JSON.
func padAffinity(sp *schedulingv1alpha1.SchedulingProfile, size int) {
	GinkgoHelper()
	i := slices.IndexFunc(sp.Spec.PluginConfig, func(pc schedulingv1alpha1.PluginConfig) bool { return pc.Name == "NodeAffinity" })
	Expect(i).NotTo(BeNumerically("<", 0), "a padded profile has NodeAffinity args")
	var args struct {
		AddedAffinity corev1.NodeAffinity `json:"addedAffinity"`
	}
	Expect(json.Unmarshal(sp.Spec.PluginConfig[i].Args.Raw, &args)).To(Succeed())
	expr := &args.AddedAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
	spec, err := json.Marshal(sp.Spec)
	Expect(err).NotTo(HaveOccurred())
	// Each value adds `"zone-0000000",` to the spec.
	for n := len(spec); n < size; n += len(`"zone-0000000",`) {
		expr.Values = append(expr.Values, fmt.Sprintf("zone-%07d", len(expr.Values)))
	}
	raw, err := json.Marshal(args)
	Expect(err).NotTo(HaveOccurred())
	sp.Spec.PluginConfig[i].Args.Raw = raw
}

// refusalMessage is what status (subject "Generation 1") and the webhook
// (subject "SchedulingProfile NAME") say of refusals, given as validate
// prints them: a reserved name alone, a size after the subject, and what
// keeps the spec from being built after "SUBJECT cannot be built: ".
func refusalMessage(subject string, refusals []string) string {
	var parts, built []string
	for _, r := range refusals {
		switch {
		case strings.HasPrefix(r, "cannot be built: "):
			built = append(built, strings.TrimPrefix(r, "cannot be built: "))
		case strings.HasPrefix(r, "is "):
			parts = append(parts, subject+" "+r)
		default:
			parts = append(parts, r)
		}
	}
	if len(built) > 0 {
		parts = append(parts, subject+" cannot be built: "+strings.Join(built, "; "))
	}
	return strings.Join(parts, "; ")
}

// validateFile runs `profile-scheduler validate` as the suite's operator
// judges profiles, and returns its exit code and the refusals it printed
// for the one profile in file.
func validateFile(file, name string) (int, []string) {
	GinkgoHelper()
	var stdout, stderr bytes.Buffer
	code := cli.Validate(ctx, []string{"--namespace=" + controllers.OperatorNamespace(), file},
		cli.Streams{In: strings.NewReader(""), Out: &stdout, Err: &stderr})
	prefix := fmt.Sprintf("%s:1: %s: ", file, name)
	var refusals []string
	for _, l := range lines(stdout.String()) {
		Expect(l).To(HavePrefix(prefix))
		refusals = append(refusals, strings.TrimPrefix(l, prefix))
	}
	return code, refusals
}

var _ = Describe("The differential corpus", func() {
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.yaml"))
	if err != nil {
		panic(err)
	}

	It("is large enough, with valid and invalid profiles", func() {
		admitted := 0
		for _, f := range files {
			if loadCorpusProfile(f).admitted {
				admitted++
			}
		}
		Expect(len(files)).To(BeNumerically(">=", 40))
		Expect(admitted).To(BeNumerically(">=", 10))
		Expect(len(files) - admitted).To(BeNumerically(">=", 10))
	})

	// Each profile is judged three ways: by validate on its file, by the
	// webhook on a server-side dry run, and by the controller once
	// stored (through the webhook when it admits it, around it when it
	// does not). They agree with each other and with the file.
	for _, file := range files {
		It("judges "+filepath.Base(file)+" alike in the webhook, the status and validate", func() {
			c := loadCorpusProfile(file)
			name := c.profile.Name

			By("validate")
			code, refusals := validateFile(c.file, name)
			Expect(refusals).To(Equal(c.refusals))
			if c.admitted {
				Expect(code).To(BeZero())
			} else {
				Expect(code).To(Equal(cli.ExitRefused))
			}

			By("the webhook, on a dry run")
			judged := c.profile.DeepCopy()
			judged.Labels = map[string]string{webhookLabel: "true"}
			err := k8sClient.Create(ctx, judged.DeepCopy(), client.DryRunAll)
			if c.admitted {
				Expect(err).NotTo(HaveOccurred())
			} else {
				want := refusalMessage("SchedulingProfile "+name, c.refusals)
				if c.reason == schedulingv1alpha1.ReasonReservedSchedulerName {
					want = "SchedulingProfile " + name + ": " + want
				}
				Expect(err).To(MatchError(webhookDenial + want))
			}

			By("the controller's status")
			stored := judged
			if !c.admitted {
				stored = c.profile.DeepCopy()
			}
			Expect(k8sClient.Create(ctx, stored)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, stored))).To(Succeed()) })
			if c.admitted {
				Eventually(profileCondition(name, schedulingv1alpha1.ProfileAccepted)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonBuilt))
				Eventually(profileCondition(name, schedulingv1alpha1.ProfileReady)).Should(HaveField("Status", metav1.ConditionTrue))
				return
			}
			Eventually(profileCondition(name, schedulingv1alpha1.ProfileAccepted)).ShouldNot(BeNil())
			Expect(profileCondition(name, schedulingv1alpha1.ProfileAccepted)()).To(And(
				haveCondition(metav1.ConditionFalse, c.reason),
				HaveField("Message", refusalMessage("Generation 1", c.statusRefusals))))
			Expect(profileCondition(name, schedulingv1alpha1.ProfileReady)()).To(haveCondition(metav1.ConditionFalse, c.reason))
		})
	}
})

// A KubeSchedulerConfiguration with a GPU extender whose resource the
// scheduler ignores: the profile under kube-scheduler's own name, which
// also disables NodeResourcesFit, is refused for both; the other converts.
const gpuSchedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      disabled:
      - name: NodeResourcesFit
- schedulerName: gpu
extenders:
- urlPrefix: "http://gpu-extender.kube-system.svc:8888/scheduler"
  filterVerb: filter
  nodeCacheCapable: true
  managedResources:
  - name: example.com/gpu
    ignoredByScheduler: true
`

var _ = Describe("profile-scheduler convert", func() {
	It("reports every refusal of a profile, and converts ignoredByScheduler", func() {
		file := filepath.Join(manifests, "gpu-scheduler-config.yaml")
		Expect(os.WriteFile(file, []byte(gpuSchedulerConfig), 0o644)).To(Succeed())
		var stdout, stderr bytes.Buffer
		code := cli.Convert(ctx, []string{file}, cli.Streams{In: strings.NewReader(""), Out: &stdout, Err: &stderr})
		Expect(code).To(Equal(cli.ExitRefused), stderr.String())
		const refused = "convert: profiles[0]: SchedulingProfile default-scheduler would be refused: "
		var refusals []string
		for _, l := range lines(stderr.String()) {
			if strings.HasPrefix(l, "convert: profiles[") {
				refusals = append(refusals, l)
			}
		}
		Expect(refusals).To(Equal([]string{
			refused + "schedulerName default-scheduler is reserved for another scheduler; choose another name",
			refused + "cannot be built: extenders[0].managedResources[0].ignoredByScheduler: can't find NodeResourcesFitArgs in plugin config: " +
				"an extender says the scheduler ignores example.com/gpu, which only NodeResourcesFit can do, and this profile does not enable it",
		}))
		Expect(stdout.String()).To(ContainSubstring("ignoredByScheduler: true"))
	})
})
