package operator_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

var _ = Describe("A shadow's status", func() {
	It("tells an approver bound to one namespace nothing of another namespace's pods", func() {
		nodes("privacy", 2, "4", "8Gi")
		apply("privacy-live", profileManifest("privacy-live", fitScoring("MostAllocated")))
		serving("privacy-live")
		apply("privacy-shadow", profileManifest("privacy-shadow", "shadowOf: privacy-live\n"+fitScoring("LeastAllocated")))
		shadowing("privacy-shadow")

		mine, theirs := namespace(), namespace()
		// The approver reads SchedulingProfiles cluster-wide, as the
		// schedulingprofile-reader ClusterRole allows, and events in their
		// own namespace only.
		Expect(k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "privacy-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "privacy-profile-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "ns-approver"}},
		})).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "privacy-profile-reader"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{schedulingv1alpha1.GroupVersion.Group}, Resources: []string{"schedulingprofiles"}, Verbs: []string{"get", "list"}}},
		})).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "events"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{eventsv1.GroupName}, Resources: []string{"events"}, Verbs: []string{"list"}}},
		})).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "events"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "events"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "ns-approver"}},
		})).To(Succeed())
		impersonated := rest.CopyConfig(cfg)
		impersonated.Impersonate = rest.ImpersonationConfig{UserName: "ns-approver"}
		approver, err := client.New(impersonated, client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())

		// Packing and spreading disagree from the second pod on.
		var pods []string
		for i, ns := range []string{mine, theirs, theirs} {
			pod := createPod(poolPod(ns, "secret-"+string(rune('a'+i)), "privacy-live", "privacy", "500m", "512Mi"))
			boundNode(pod)
			shadowEvaluated("privacy-shadow", int64(i+1))
			pods = append(pods, pod.Name, string(pod.UID))
		}
		Eventually(func() []string { return shadowNotes(theirs, "secret-c") }).ShouldNot(BeEmpty())

		sp := &schedulingv1alpha1.SchedulingProfile{}
		Eventually(func() int64 {
			Expect(approver.Get(ctx, client.ObjectKey{Name: "privacy-shadow"}, sp)).To(Succeed())
			return sp.Status.Shadow.OtherNode
		}).Should(BeNumerically(">", 0))
		data, err := json.Marshal(sp)
		Expect(err).NotTo(HaveOccurred())
		for _, s := range append(pods, theirs) {
			Expect(string(data)).NotTo(ContainSubstring(s))
		}
		var events eventsv1.EventList
		Expect(approver.List(ctx, &events, client.InNamespace(mine))).To(Succeed())
		err = approver.List(ctx, &events, client.InNamespace(theirs))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing another namespace's events: %v", err)
	})
})
