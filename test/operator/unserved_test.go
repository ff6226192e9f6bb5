package operator_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// unservedWarningDelay and ownPrefix are the suite operator's settings of
// the NoProfile event: short, so that the specs wait little.
const (
	unservedWarningDelay = 2 * time.Second
	ownPrefix            = "own-"
)

// noProfileEvents returns the NoProfile events about pod, each with how
// often it was emitted (1 + its series count).
func noProfileEvents(pod *corev1.Pod) func() []string {
	return func() []string {
		var list eventsv1.EventList
		if err := k8sClient.List(ctx, &list, client.InNamespace(pod.Namespace)); err != nil {
			return nil
		}
		var got []string
		for _, e := range list.Items {
			if e.Regarding.Name != pod.Name || e.Reason != "NoProfile" {
				continue
			}
			count := int32(1)
			if e.Series != nil {
				count = e.Series.Count
			}
			got = append(got, fmt.Sprintf("%s %d: %s", e.Type, count, e.Note))
		}
		return got
	}
}

var _ = Describe("Pods no profile serves", func() {
	It("get one NoProfile event for the operator's own schedulerNames only", func() {
		ns := namespace()
		gone := "unserved-" + ns
		Expect(k8sClient.Create(ctx, &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: gone}})).To(Succeed())
		serving(gone)
		Expect(k8sClient.Delete(ctx, &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: gone}})).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Name: gone}, &schedulingv1alpha1.SchedulingProfile{}))
		}).Should(BeTrue())

		orphan := createPod(testenv.Pod(ns, "orphan", gone, "100m", "64Mi"))
		prefixed := createPod(testenv.Pod(ns, "prefixed", ownPrefix+ns, "100m", "64Mi"))
		foreign := createPod(testenv.Pod(ns, "foreign", "other-scheduler-"+ns, "100m", "64Mi"))
		reserved := createPod(testenv.Pod(ns, "reserved", corev1.DefaultSchedulerName, "100m", "64Mi"))

		Eventually(noProfileEvents(orphan)).Should(ConsistOf(
			And(HavePrefix("Warning 1: "), ContainSubstring(fmt.Sprintf("no SchedulingProfile serves schedulerName %q (profiles: ", gone)))))
		Eventually(noProfileEvents(prefixed)).Should(ConsistOf(
			And(HavePrefix("Warning 1: "), ContainSubstring(fmt.Sprintf("no SchedulingProfile serves schedulerName %q", ownPrefix+ns)))))
		// Not repeated while the pods stay unserved; never about other
		// schedulers' pods.
		Consistently(func() [][]string {
			return [][]string{noProfileEvents(orphan)(), noProfileEvents(prefixed)(), noProfileEvents(foreign)(), noProfileEvents(reserved)()}
		}).WithTimeout(3 * unservedWarningDelay).WithPolling(500 * time.Millisecond).Should(HaveExactElements(
			HaveLen(1), HaveLen(1), BeEmpty(), BeEmpty()))
	})

	It("suggest the served name a schedulerName is a likely typo of", func() {
		ns := namespace()
		served := "typo-" + ns
		Expect(k8sClient.Create(ctx, &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: served}})).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: served}}))).To(Succeed())
		})
		serving(served)
		typo := served[:len(served)-1]
		pod := createPod(testenv.Pod(ns, "typo", typo, "100m", "64Mi"))
		Eventually(noProfileEvents(pod)).Should(ConsistOf(
			And(HavePrefix("Warning 1: "), HaveSuffix(fmt.Sprintf("; did you mean %s?", served)), ContainSubstring(fmt.Sprintf("no SchedulingProfile serves schedulerName %q", typo)))))
		Consistently(noProfileEvents(pod)).WithTimeout(2 * unservedWarningDelay).WithPolling(500 * time.Millisecond).Should(HaveLen(1))
	})

	It("do not warn about a pod applied together with its profile", func() {
		ns := namespace()
		name := ownPrefix + "together-" + ns
		pod := createPod(testenv.Pod(ns, "together", name, "100m", "64Mi"))
		Expect(k8sClient.Create(ctx, &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
		})
		serving(name)
		Consistently(noProfileEvents(pod)).WithTimeout(2 * unservedWarningDelay).Should(BeEmpty())
	})
})
