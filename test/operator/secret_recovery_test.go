package operator_test

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/scheduler"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// A profile refused for its extender's CA Secret is built again when the
// Secret appears or changes, without anyone touching the profile.
var _ = Describe("A profile refused for a referenced Secret", Ordered, func() {
	const (
		operatorNS = "recovery-system"
		profile    = "tls-recovery"
		secret     = "recovery-ca"
	)
	var (
		server *httptest.Server
		stop   func()
	)

	BeforeAll(func() {
		server = httptest.NewTLSServer(http.NotFoundHandler())
		DeferCleanup(server.Close)
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}})).To(Succeed())

		// The suite's operator allows no extender: run one that allows
		// the test server, in its own namespace.
		stopOperator()
		policy, err := extender.NewPolicy([]string{server.URL}, 0)
		Expect(err).NotTo(HaveOccurred())
		running, err := testenv.StartOperator(context.Background(), cfg, testenv.OperatorOptions{
			Manager: ctrl.Options{Scheme: env.Scheme},
			Operator: operator.Options{
				ReservedSchedulerNames: []string{corev1.DefaultSchedulerName},
				WaitingPodRetention:    retention,
				MetricsRegisterer:      prometheus.NewRegistry(),
				Namespace:              operatorNS,
				Scheduler:              []scheduler.Option{scheduler.WithExtenderPolicy(policy)},
			},
		})
		Expect(err).NotTo(HaveOccurred())
		stop = func() { Expect(running.Stop()).To(Succeed()) }
	})

	AfterAll(func() {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: profile}}))).To(Succeed())
		if stop != nil {
			stop()
		}
		startOperator()
	})

	caSecret := func(ca []byte) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: secret, Labels: map[string]string{schedulingv1alpha1.ExtenderTLSLabel: profile}},
			Data:       map[string][]byte{"ca.crt": ca},
		}
	}
	accepted := profileCondition(profile, schedulingv1alpha1.ProfileAccepted)

	It("is refused with a message that says how to fix it", func() {
		apply(profile, `apiVersion: scheduling.schedprofiles.io/v1alpha1
kind: SchedulingProfile
metadata:
  name: `+profile+`
spec:
  extenders:
  - urlPrefix: `+server.URL+`
    filterVerb: filter
    enableHTTPS: true
    tlsConfig:
      caSecretRef:
        name: `+secret+`
`)
		Eventually(accepted).Should(And(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec),
			HaveField("Message", ContainSubstring("create Secret "+operatorNS+"/"+secret+" with that label and key ca.crt"))))
	})

	It("becomes Ready when the Secret appears, the profile untouched", func() {
		before := getProfile(profile)
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
		Expect(k8sClient.Create(ctx, caSecret(ca))).To(Succeed())
		Eventually(profileCondition(profile, schedulingv1alpha1.ProfileReady), "10s").Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonServing))
		after := getProfile(profile)
		Expect(after.Generation).To(Equal(before.Generation))
		Expect(after.Annotations).To(Equal(before.Annotations))
		Expect(after.Status.ServingGeneration).To(Equal(after.Generation))
	})

	It("is refused again when the Secret's CA becomes invalid, the built generation serving on", func() {
		Expect(k8sClient.Update(ctx, caSecret([]byte("not a certificate")))).To(Succeed())
		Eventually(accepted, "10s").Should(And(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec),
			HaveField("Message", ContainSubstring("extenders[0].tlsConfig.caSecretRef: key ca.crt of Secret "+operatorNS+"/"+secret+" holds no PEM certificate; put the CA bundle there, and the profile is built again"))))
		sp := getProfile(profile)
		Expect(sp.Status.ServingGeneration).To(Equal(sp.Generation))
		Expect(profileCondition(profile, schedulingv1alpha1.ProfileActive)()).To(And(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonServing),
			HaveField("Message", "Generation 1, the last valid one, keeps serving schedulerName "+profile)))
	})

	It("is refused when its Secret is labelled for another profile, the built generation serving on", func() {
		// A profile author who names a Secret of the namespace gets its
		// material only while the Secret's owner labels it for that
		// profile; relabelling it revokes it without touching the profile.
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
		Expect(k8sClient.Update(ctx, caSecret(ca))).To(Succeed())
		Eventually(accepted, "10s").Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonBuilt))
		other := caSecret(ca)
		other.Labels[schedulingv1alpha1.ExtenderTLSLabel] = "another-profile"
		Expect(k8sClient.Update(ctx, other)).To(Succeed())
		Eventually(accepted, "10s").Should(And(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonInvalidSpec),
			HaveField("Message", ContainSubstring("no Secret "+secret+" in namespace "+operatorNS+" is labelled "+schedulingv1alpha1.ExtenderTLSLabel+"="+profile))))
		sp := getProfile(profile)
		Expect(sp.Status.ServingGeneration).To(Equal(sp.Generation))
	})
})
