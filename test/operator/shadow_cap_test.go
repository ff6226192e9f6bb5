package operator_test

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
)

// The suite's operator runs with the default --max-shadows.
var _ = Describe("The shadow cap", Ordered, func() {
	// older are the shadows that fill the cap, oldest first: those other
	// specs left, then this one's.
	var older []string

	shadowProfile := func(name string, labels map[string]string) *schedulingv1alpha1.SchedulingProfile {
		return &schedulingv1alpha1.SchedulingProfile{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       schedulingv1alpha1.SchedulingProfileSpec{ShadowOf: ptr.To("capped")},
		}
	}

	BeforeAll(func() {
		var list schedulingv1alpha1.SchedulingProfileList
		Expect(k8sClient.List(ctx, &list)).To(Succeed())
		for _, sp := range list.Items {
			if sp.Spec.ShadowOf != nil && sp.DeletionTimestamp.IsZero() {
				older = append(older, sp.Name)
			}
		}
		Expect(len(older)).To(BeNumerically("<", profilebuild.DefaultMaxShadows), "other specs left the cap full: %v", older)
		for i := len(older); i < profilebuild.DefaultMaxShadows; i++ {
			sp := shadowProfile(fmt.Sprintf("capped-shadow-%d", i), nil)
			Expect(k8sClient.Create(ctx, sp)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, sp))).To(Succeed()) })
			shadowing(sp.Name)
			older = append(older, sp.Name)
		}
	})

	// limit is what both say after "does not run: " or "cannot be a
	// shadow: ", but for the order of the older shadows' names.
	limit := fmt.Sprintf("the operator runs at most %d shadow profiles (its --max-shadows), and %d older ones exist: ",
		profilebuild.DefaultMaxShadows, profilebuild.DefaultMaxShadows)
	const advice = "; delete one, or ask the operator's admin to raise --max-shadows"
	olderNames := func(msg, prefix string) []string {
		GinkgoHelper()
		Expect(msg).To(HavePrefix(prefix + limit))
		Expect(msg).To(HaveSuffix(advice))
		return strings.Split(strings.TrimSuffix(strings.TrimPrefix(msg, prefix+limit), advice), ", ")
	}

	It("refuses at admission a shadow beyond --max-shadows, naming the older ones", func() {
		extra := shadowProfile("capped-extra", map[string]string{webhookLabel: "true"})
		// The webhook counts the shadows its cache holds.
		var err error
		Eventually(func() error {
			err = k8sClient.Create(ctx, extra.DeepCopy(), client.DryRunAll)
			return err
		}).Should(HaveOccurred())
		Expect(olderNames(err.Error(), webhookDenial+"SchedulingProfile capped-extra cannot be a shadow: ")).To(ConsistOf(older))
		Expect(k8sClient.Create(ctx, extra)).To(MatchError(ContainSubstring(webhookDenial)))
		profileAbsent("capped-extra")

		By("and lets a profile that is no shadow through")
		live := &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: "capped", Labels: map[string]string{webhookLabel: "true"}}}
		Expect(k8sClient.Create(ctx, live, client.DryRunAll)).To(Succeed())
	})

	It("refuses in status a shadow beyond --max-shadows that reached the cluster around the webhook", func() {
		extra := shadowProfile("capped-unjudged", nil)
		Expect(k8sClient.Create(ctx, extra)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, extra))).To(Succeed()) })
		Eventually(profileCondition("capped-unjudged", schedulingv1alpha1.ProfileAccepted)).Should(
			haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonTooManyShadows))
		accepted := profileCondition("capped-unjudged", schedulingv1alpha1.ProfileAccepted)()
		Expect(olderNames(accepted.Message, "Generation 1 does not run: ")).To(ConsistOf(older))
		Expect(profileCondition("capped-unjudged", schedulingv1alpha1.ProfileActive)()).To(
			And(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonNotServing), HaveField("Message", accepted.Message)))
		Expect(profileCondition("capped-unjudged", schedulingv1alpha1.ProfileReady)()).To(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonTooManyShadows))
		Expect(profileCondition("capped-unjudged", schedulingv1alpha1.ProfileStalled)()).To(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonTooManyShadows))
		Expect(getProfile("capped-unjudged").Status.Shadow).To(BeNil())

		By("while the older shadows keep running")
		for _, name := range older {
			Expect(profileCondition(name, schedulingv1alpha1.ProfileActive)()).To(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonShadowing))
		}
	})
})
