package localcluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestKubeletStartsPodsOnlyWithPreparedClaims(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", UID: "pod-uid"},
		Spec: corev1.PodSpec{
			NodeName: "gpu-0",
			ResourceClaims: []corev1.PodResourceClaim{
				{Name: "gpus", ResourceClaimTemplateName: ptr.To("two-gpus")},
				{Name: "shared", ResourceClaimName: ptr.To("shared")},
			},
			Containers: []corev1.Container{{Name: "app", Image: "app"}},
		},
		Status: corev1.PodStatus{ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To("train-gpus-x")}}},
	}
	reserved := []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "train", UID: "pod-uid"}}
	claim := func(name string, owned bool, allocated bool, reservedFor []resourcev1.ResourceClaimConsumerReference) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if owned {
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "train", UID: "pod-uid", Controller: ptr.To(true)}}
		}
		if allocated {
			c.Status.Allocation = &resourcev1.AllocationResult{}
		}
		c.Status.ReservedFor = reservedFor
		return c
	}
	tests := []struct {
		name   string
		pod    func(*corev1.Pod)
		claims []*resourcev1.ResourceClaim
		want   bool
	}{
		{
			name:   "both claims allocated and reserved for the pod",
			claims: []*resourcev1.ResourceClaim{claim("train-gpus-x", true, true, reserved), claim("shared", false, true, reserved)},
			want:   true,
		},
		{
			name:   "the template's claim not made yet",
			pod:    func(p *corev1.Pod) { p.Status.ResourceClaimStatuses = nil },
			claims: []*resourcev1.ResourceClaim{claim("shared", false, true, reserved)},
		},
		{
			name:   "the template's claim needed none",
			pod:    func(p *corev1.Pod) { p.Status.ResourceClaimStatuses[0].ResourceClaimName = nil },
			claims: []*resourcev1.ResourceClaim{claim("shared", false, true, reserved)},
			want:   true,
		},
		{
			name:   "a claim of that name made for another pod",
			claims: []*resourcev1.ResourceClaim{claim("train-gpus-x", false, true, reserved), claim("shared", false, true, reserved)},
		},
		{
			name:   "a claim not allocated",
			claims: []*resourcev1.ResourceClaim{claim("train-gpus-x", true, true, reserved), claim("shared", false, false, nil)},
		},
		{
			name: "a claim reserved for another pod only",
			claims: []*resourcev1.ResourceClaim{claim("train-gpus-x", true, true, reserved), claim("shared", false, true,
				[]resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "other", UID: "other-uid"}})},
		},
		{
			name:   "a claim missing",
			claims: []*resourcev1.ResourceClaim{claim("train-gpus-x", true, true, reserved)},
		},
		{
			name: "the extended resources' claim not reserved for the pod",
			pod: func(p *corev1.Pod) {
				p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "train-extended-resources-y"}
			},
			claims: []*resourcev1.ResourceClaim{claim("train-gpus-x", true, true, reserved), claim("shared", false, true, reserved), claim("train-extended-resources-y", true, true, nil)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod.DeepCopy()
			if tt.pod != nil {
				tt.pod(p)
			}
			client := fake.NewClientset()
			factory := informers.NewSharedInformerFactory(client, 0)
			k, err := NewKubelet(client, factory)
			if err != nil {
				t.Fatal(err)
			}
			store := factory.Resource().V1().ResourceClaims().Informer().GetStore()
			for _, c := range tt.claims {
				if err := store.Add(c); err != nil {
					t.Fatal(err)
				}
			}
			if got := k.claimsPrepared(p); got != tt.want {
				t.Errorf("claimsPrepared = %v, want %v", got, tt.want)
			}
		})
	}
}
