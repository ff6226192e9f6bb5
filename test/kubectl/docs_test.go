package kubectl_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// docs/gitops.md shows what `kubectl get schedulingprofiles -o wide` prints
// of a serving profile and its shadow; the doc's columns and cells must be
// what it prints, but for ages and counts.
var _ = Describe("docs/gitops.md's shadow output", Ordered, func() {
	ctx := context.Background()

	BeforeAll(func() {
		ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
		running, err := testenv.StartOperator(ctx, env.Config, testenv.OperatorOptions{
			Operator: operator.Options{
				ReservedSchedulerNames: []string{corev1.DefaultSchedulerName},
				ShadowStatusPeriod:     500 * time.Millisecond,
			},
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(running.Stop()).To(Succeed()) })
	})

	It("is what kubectl prints of the doc's shadow of the bin-packing sample", func() {
		doc := docFile("gitops.md")
		run("admin", "apply", "-f", filepath.Join(testenv.RepoRoot(), "config", "samples", "bin-packing.yaml"))
		shadow := filepath.Join(GinkgoT().TempDir(), "shadow.yaml")
		Expect(os.WriteFile(shadow, []byte(docBlock(doc, "```yaml\n", "name: bin-packing-next")), 0o644)).To(Succeed())
		run("admin", "apply", "-f", shadow)
		DeferCleanup(func() {
			run("admin", "delete", "schedulingprofile", "bin-packing-next", "bin-packing", "--ignore-not-found")
		})

		// One placement of bin-packing for the shadow to evaluate, on a
		// node and in a namespace that go with the spec: other specs count
		// the nodes their pods may land on.
		node := testenv.Node("gitops-node", "4", "8Gi", nil)
		Expect(testenv.CreateNode(ctx, adminClient, node)).To(Succeed())
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gitops-"}}
		Expect(adminClient.Create(ctx, n)).To(Succeed())
		DeferCleanup(func() {
			Expect(adminClient.Delete(ctx, n)).To(Succeed())
			Expect(adminClient.Delete(ctx, node)).To(Succeed())
		})
		Eventually(func(g Gomega) {
			sp := &schedulingv1alpha1.SchedulingProfile{}
			g.Expect(adminClient.Get(ctx, client.ObjectKey{Name: "bin-packing-next"}, sp)).To(Succeed())
			accepted := meta.FindStatusCondition(sp.Status.Conditions, schedulingv1alpha1.ProfileAccepted)
			g.Expect(accepted).NotTo(BeNil())
			g.Expect(accepted.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(accepted.ObservedGeneration).To(Equal(sp.Generation))
		}).WithTimeout(time.Minute).Should(Succeed())
		Expect(adminClient.Create(ctx, testenv.Pod(n.Name, "web-0", "bin-packing", "100m", "100Mi"))).To(Succeed())
		Eventually(func(g Gomega) {
			sp := &schedulingv1alpha1.SchedulingProfile{}
			g.Expect(adminClient.Get(ctx, client.ObjectKey{Name: "bin-packing-next"}, sp)).To(Succeed())
			g.Expect(sp.Status.Shadow).NotTo(BeNil())
			g.Expect(sp.Status.Shadow.Evaluated).To(BeNumerically(">", 0))
		}).WithTimeout(time.Minute).Should(Succeed())

		shown := docBlock(doc, "$ kubectl get schedulingprofiles -o wide\n", "bin-packing-next")
		out := run("admin", "get", "schedulingprofiles", "bin-packing", "bin-packing-next", "-o", "wide")
		Expect(strings.Fields(strings.SplitN(out, "\n", 2)[0])).To(Equal(strings.Fields(strings.SplitN(shown, "\n", 2)[0])), "doc:\n%s\nkubectl:\n%s", shown, out)
		want, got := table(shown), table(out)
		Expect(got).To(HaveLen(len(want)), "doc:\n%s\nkubectl:\n%s", shown, out)
		for name, row := range want {
			Expect(got).To(HaveKey(name), "doc:\n%s\nkubectl:\n%s", shown, out)
			for column, cell := range row {
				if column == "AGE" {
					continue
				}
				Expect(alikeNumbers(got[name][column])).To(Equal(alikeNumbers(cell)), "%s of %s\ndoc:\n%s\nkubectl:\n%s", column, name, shown, out)
			}
		}
	})
})

// docFile is the text of docs/name.
func docFile(name string) string {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", name))
	Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// docBlock is the text of the first block of doc that starts after opening
// and holds has, up to its closing fence.
func docBlock(doc, opening, has string) string {
	GinkgoHelper()
	for _, part := range strings.Split(doc, opening)[1:] {
		block, _, found := strings.Cut(part, "```")
		if found && strings.Contains(block, has) {
			return block
		}
	}
	Fail("no block after " + strings.TrimSpace(opening) + " holds " + has)
	return ""
}

// alikeNumbers is s with every number made alike: counts and generations
// differ between a doc and a run.
func alikeNumbers(s string) string {
	return regexp.MustCompile(`\d+`).ReplaceAllString(s, "N")
}
