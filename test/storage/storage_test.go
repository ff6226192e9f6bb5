package storage_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

const (
	labelZone = "topology.kubernetes.io/zone"
	csiDriver = "csi.storage.example"
)

// Upstream's reasons (nodevolumelimits/csi.go, volumerestrictions) and the
// verdict DefaultPreemption adds when no pod of lower priority is in the way.
const (
	reasonMaxVolumeCount = "node(s) exceed max volume count"
	reasonRWOPConflict   = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
	reasonBindConflict   = "node(s) didn't find available persistent volumes to bind"
)

// reasonDriverNotInstalled is NodeVolumeLimits' rejection (1.37.2, with
// VolumeLimitScaling) of a node lacking a driver that asks to be present.
func reasonDriverNotInstalled(driver string) string {
	return driver + " CSI driver is not installed on the node"
}

// createCSIDriver creates a cluster-wide CSIDriver for the spec that needs
// no attachment, deleted after the spec.
func createCSIDriver(ctx context.Context, name string, spec storagev1.CSIDriverSpec) {
	GinkgoHelper()
	spec.AttachRequired = ptr.To(false)
	driver := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	create(ctx, driver)
	DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(c.Delete(ctx, driver))).To(Succeed()) })
}

func unschedulableMessage(nodes int, reason string) string {
	return fmt.Sprintf("0/%[1]d nodes are available: %[1]d %[2]s. preemption: 0/%[1]d nodes are available: %[1]d No preemption victims found for incoming pod.", nodes, reason)
}

// newNamespace returns a namespace of the spec, deleted after it together
// with the spec's claims and volumes.
func newNamespace(ctx context.Context) string {
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "storage-"}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cleanUp, ns.Name)
	return ns.Name
}

// cleanUp deletes the spec's pods, claims and volumes and every node, so
// specs do not see each other's nodes or attachments. Pods go at once (the
// simulated kubelet confirms deletions); claims and volumes once the
// protection controllers let them.
func cleanUp(ctx context.Context, ns string) {
	zero := int64(0)
	Expect(cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})).To(Succeed())
	Expect(cs.CoreV1().PersistentVolumeClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})).To(Succeed())
	Expect(cs.CoreV1().PersistentVolumes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "namespace=" + ns})).To(Succeed())
	Expect(cs.StorageV1().CSINodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})).To(Succeed())
	Expect(cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})).To(Succeed())
	Eventually(func() ([]corev1.Node, error) {
		l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}).Should(BeEmpty())
}

// createNodes creates nodes named prefix-0… with the zones given, Ready and
// untainted.
func createNodes(ctx context.Context, prefix string, zones ...string) []string {
	var names []string
	for i, zone := range zones {
		name := fmt.Sprintf("%s-%d", prefix, i)
		Expect(testenv.CreateNode(ctx, c, testenv.Node(name, "4", "16Gi", map[string]string{labelZone: zone}))).To(Succeed())
		names = append(names, name)
	}
	return names
}

func createClass(ctx context.Context, class *storagev1.StorageClass) {
	Expect(c.Create(ctx, class)).To(Succeed())
	DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(c.Delete(ctx, class))).To(Succeed()) })
}

func claim(ns, name, class string, mode corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(class),
			AccessModes:      []corev1.PersistentVolumeAccessMode{mode},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// persistentVolume is a statically provisioned 1Gi volume of class,
// labelled with the spec's namespace for clean-up.
func persistentVolume(ns, name, class string, mode corev1.PersistentVolumeAccessMode, source corev1.PersistentVolumeSource) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"namespace": ns}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{mode},
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        source,
		},
	}
}

func hostPath(name string) corev1.PersistentVolumeSource {
	return corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/" + name}}
}

// podWithClaims is a pod of the default profile mounting the claims.
func podWithClaims(ns, name string, claims ...string) *corev1.Pod {
	pod := testenv.Pod(ns, name, schedulerName, "100m", "128Mi")
	for i, claim := range claims {
		vol := fmt.Sprintf("vol-%d", i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
			Name:         vol,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}},
		})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: "/data/" + vol})
	}
	return pod
}

func create(ctx context.Context, obj client.Object) {
	GinkgoHelper()
	Expect(c.Create(ctx, obj)).To(Succeed())
}

func getClaim(ctx context.Context, ns, name string) func() (*corev1.PersistentVolumeClaim, error) {
	return func() (*corev1.PersistentVolumeClaim, error) {
		return cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	}
}

func getPod(ctx context.Context, ns, name string) func() (*corev1.Pod, error) {
	return func() (*corev1.Pod, error) { return cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}) }
}

func getVolume(ctx context.Context, name string) *corev1.PersistentVolume {
	GinkgoHelper()
	pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	return pv
}

func boundClaim() OmegaMatcher {
	return And(HaveField("Status.Phase", corev1.ClaimBound), HaveField("Spec.VolumeName", Not(BeEmpty())))
}

// waitScheduled waits until the pod is bound to a node and returns it; a
// failure shows why the scheduler keeps it pending.
func waitScheduled(ctx context.Context, ns, name string) *corev1.Pod {
	GinkgoHelper()
	var pod *corev1.Pod
	Eventually(func(g Gomega) {
		var err error
		pod, err = getPod(ctx, ns, name)()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pod.Spec.NodeName).NotTo(BeEmpty(), "pod %s/%s is pending: %q", ns, name, podScheduledMessage(pod))
	}).Should(Succeed())
	return pod
}

func podScheduledMessage(p *corev1.Pod) string {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled {
			return cond.Message
		}
	}
	return ""
}

// hostnameOf lists the hostnames a provisioned volume's node affinity
// names: exactly the node it was provisioned for.
func hostnameOf(pv *corev1.PersistentVolume) []string {
	var values []string
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, req := range term.MatchExpressions {
			if req.Key == corev1.LabelHostname {
				values = append(values, req.Values...)
			}
		}
	}
	return values
}

func localClass(name string) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       localcluster.SimulatedProvisionerName,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
	}
}

var _ = Describe("The control plane's storage side", func() {
	It("provisions a WaitForFirstConsumer claim on the selected node, and the PV binder binds it", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		nodes := createNodes(ctx, "select", "zone-a", "zone-b")
		class := "local-" + ns
		createClass(ctx, localClass(class))
		create(ctx, claim(ns, "data", class, corev1.ReadWriteOnce))

		By("the PV binder waits for a consumer")
		Consistently(getClaim(ctx, ns, "data")).Should(And(
			HaveField("Status.Phase", corev1.ClaimPending),
			HaveField("ObjectMeta.Annotations", Not(HaveKey(volume.AnnStorageProvisioner))),
		))
		By("selecting a node, as VolumeBinding's PreBind does")
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, volume.AnnSelectedNode, nodes[1])
		_, err := cs.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "data", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(getClaim(ctx, ns, "data")).Should(And(
			boundClaim(),
			HaveField("ObjectMeta.Annotations", HaveKeyWithValue(volume.AnnStorageProvisioner, localcluster.SimulatedProvisionerName)),
			HaveField("ObjectMeta.Annotations", HaveKeyWithValue(volume.AnnBindCompleted, "yes")),
		))
		pvc, err := getClaim(ctx, ns, "data")()
		Expect(err).NotTo(HaveOccurred())
		pv := getVolume(ctx, pvc.Spec.VolumeName)
		Expect(hostnameOf(pv)).To(Equal([]string{nodes[1]}))
		Expect(pv.Spec.ClaimRef).To(HaveField("UID", pvc.UID))
		Expect(pv.Spec.StorageClassName).To(Equal(class))
		Expect(pv.Spec.PersistentVolumeReclaimPolicy).To(Equal(corev1.PersistentVolumeReclaimDelete))
		Expect(pv.Status.Phase).To(Equal(corev1.VolumeBound))

		By("deleting the claim releases the volume, which the provisioner deletes")
		Expect(cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() error {
			_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			return err
		}).Should(Satisfy(apierrors.IsNotFound))
	})

	It("binds an Immediate claim to a matching zonal volume without a scheduler", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		class := "zonal-" + ns
		createClass(ctx, &storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "kubernetes.io/no-provisioner",
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
		})
		create(ctx, zonalVolume(ns, "zonal-"+ns, class, "zone-b"))
		create(ctx, claim(ns, "data", class, corev1.ReadWriteOnce))
		Eventually(getClaim(ctx, ns, "data")).Should(And(boundClaim(), HaveField("Spec.VolumeName", "zonal-"+ns)))
	})
})

func zonalVolume(ns, name, class, zone string) *corev1.PersistentVolume {
	pv := persistentVolume(ns, name, class, corev1.ReadWriteOnce, hostPath(name))
	pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: labelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone},
		}}}},
	}}
	return pv
}

var _ = Describe("Scheduling pods with volumes", func() {
	It("provisions a WaitForFirstConsumer claim on the node the scheduler picked, and binds the pod there", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createNodes(ctx, "wffc", "zone-a", "zone-b", "zone-c")
		class := "local-" + ns
		createClass(ctx, localClass(class))
		create(ctx, claim(ns, "data-db-0", class, corev1.ReadWriteOnce))
		create(ctx, podWithClaims(ns, "db-0", "data-db-0"))

		pod := waitScheduled(ctx, ns, "db-0")
		Eventually(getPod(ctx, ns, "db-0")).Should(HaveField("Status.Phase", corev1.PodRunning))
		pvc, err := getClaim(ctx, ns, "data-db-0")()
		Expect(err).NotTo(HaveOccurred())
		Expect(pvc).To(boundClaim())
		Expect(pvc.Annotations).To(HaveKeyWithValue(volume.AnnSelectedNode, pod.Spec.NodeName))
		Expect(hostnameOf(getVolume(ctx, pvc.Spec.VolumeName))).To(Equal([]string{pod.Spec.NodeName}))
	})

	It("provisions the claims of a StatefulSet's volumeClaimTemplates on the nodes of its pods", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createNodes(ctx, "sts", "zone-a", "zone-b", "zone-c")
		class := "local-" + ns
		createClass(ctx, localClass(class))
		template := podWithClaims(ns, "", "data")
		template.Spec.Volumes = nil
		template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		template.Labels = map[string]string{"app": "db"}
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: appsv1.StatefulSetSpec{
				Replicas:             ptr.To[int32](2),
				Selector:             &metav1.LabelSelector{MatchLabels: template.Labels},
				Template:             corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: template.Labels}, Spec: template.Spec},
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{*claim("", "data", class, corev1.ReadWriteOnce)},
			},
		}
		create(ctx, sts)
		// Before the namespace's clean-up, which the controller would undo.
		DeferCleanup(func(ctx context.Context) { Expect(c.Delete(ctx, sts)).To(Succeed()) })

		for _, name := range []string{"db-0", "db-1"} {
			Eventually(getPod(ctx, ns, name)).Should(HaveField("Status.Phase", corev1.PodRunning), "the StatefulSet controller creates %s once the pod before it runs", name)
			pod := waitScheduled(ctx, ns, name)
			pvc, err := getClaim(ctx, ns, "data-"+name)()
			Expect(err).NotTo(HaveOccurred())
			Expect(pvc).To(boundClaim())
			Expect(hostnameOf(getVolume(ctx, pvc.Spec.VolumeName))).To(Equal([]string{pod.Spec.NodeName}))
		}
	})

	It("places a pod whose Immediate claim is bound to a zonal volume in that zone", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		nodes := createNodes(ctx, "zonal", "zone-a", "zone-b", "zone-c", "zone-a", "zone-b", "zone-c")
		class := "zonal-" + ns
		createClass(ctx, &storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "kubernetes.io/no-provisioner",
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
		})
		create(ctx, zonalVolume(ns, "zonal-"+ns, class, "zone-b"))
		create(ctx, claim(ns, "data", class, corev1.ReadWriteOnce))
		Eventually(getClaim(ctx, ns, "data")).Should(boundClaim())

		create(ctx, podWithClaims(ns, "app", "data"))
		pod := waitScheduled(ctx, ns, "app")
		Expect(pod.Spec.NodeName).To(BeElementOf(nodes[1], nodes[4]), "the zone-b nodes")
	})

	It("respects a CSI driver's attach limit, and reports upstream's message when every node is full", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		nodes := createNodes(ctx, "csi", "zone-a", "zone-b")
		for _, node := range nodes {
			create(ctx, &storagev1.CSINode{
				ObjectMeta: metav1.ObjectMeta{Name: node},
				Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
					Name: csiDriver, NodeID: node, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](1)},
				}}},
			})
		}
		// Each claim is pre-bound to a CSI volume of its own, as a static
		// provisioning would do; the PV binder completes the binding.
		for i := range 3 {
			name := fmt.Sprintf("csi-%s-%d", ns, i)
			pv := persistentVolume(ns, name, "", corev1.ReadWriteOnce, corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: csiDriver, VolumeHandle: name},
			})
			create(ctx, pv)
			pvc := claim(ns, fmt.Sprintf("data-%d", i), "", corev1.ReadWriteOnce)
			pvc.Spec.VolumeName = name
			create(ctx, pvc)
			Eventually(getClaim(ctx, ns, pvc.Name)).Should(boundClaim())
		}

		create(ctx, podWithClaims(ns, "app-0", "data-0"))
		create(ctx, podWithClaims(ns, "app-1", "data-1"))
		p0 := waitScheduled(ctx, ns, "app-0")
		p1 := waitScheduled(ctx, ns, "app-1")
		Expect(p0.Spec.NodeName).NotTo(Equal(p1.Spec.NodeName), "one attachable volume per node")

		create(ctx, podWithClaims(ns, "app-2", "data-2"))
		Eventually(getPod(ctx, ns, "app-2")).Should(WithTransform(podScheduledMessage, Equal(unschedulableMessage(2, reasonMaxVolumeCount))))
		Consistently(getPod(ctx, ns, "app-2")).Should(HaveField("Spec.NodeName", BeEmpty()))
	})

	It("provisions a claim on the node whose storage capacity leaves the most room, as 1.37.2's VolumeBinding scores it", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		// Identical nodes: only VolumeBinding's capacity score tells them
		// apart, and without it the choice among them is random.
		nodes := createNodes(ctx, "capacity", "zone-a", "zone-a", "zone-a", "zone-a", "zone-a", "zone-a")
		driver := "capacity." + ns + ".example"
		createCSIDriver(ctx, driver, storagev1.CSIDriverSpec{StorageCapacity: ptr.To(true)})
		class := "capacity-" + ns
		createClass(ctx, &storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: driver,
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		})
		// A 10Gi claim uses 67%, 50%, 10%, 83%, 40% and 25% of what each
		// node offers: scores 33, 50, 90, 17, 60 and 75 with the default
		// shape.
		for i, size := range []string{"15Gi", "20Gi", "100Gi", "12Gi", "25Gi", "40Gi"} {
			create(ctx, &storagev1.CSIStorageCapacity{
				ObjectMeta:       metav1.ObjectMeta{Namespace: ns, Name: nodes[i]},
				NodeTopology:     &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelHostname: nodes[i]}},
				StorageClassName: class,
				Capacity:         ptr.To(resource.MustParse(size)),
			})
		}
		pvc := claim(ns, "data", class, corev1.ReadWriteOnce)
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("10Gi")
		create(ctx, pvc)
		create(ctx, podWithClaims(ns, "app", "data"))

		By("VolumeBinding's PreBind selects the roomiest node for provisioning")
		Eventually(getClaim(ctx, ns, "data")).Should(HaveField("ObjectMeta.Annotations", HaveKeyWithValue(volume.AnnSelectedNode, nodes[2])))

		By("provisioning there, as the CSI driver's provisioner would, lets the pod bind")
		pvc, err := getClaim(ctx, ns, "data")()
		Expect(err).NotTo(HaveOccurred())
		name := "capacity-" + ns
		pv := persistentVolume(ns, name, class, corev1.ReadWriteOnce, corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: name},
		})
		pv.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("10Gi")
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: pvc.Name, UID: pvc.UID}
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{nodes[2]},
			}}}},
		}}
		create(ctx, pv)
		Expect(waitScheduled(ctx, ns, "app").Spec.NodeName).To(Equal(nodes[2]))
		Eventually(getClaim(ctx, ns, "data")).Should(And(boundClaim(), HaveField("Spec.VolumeName", name)))
	})

	It("keeps a pod off nodes missing a CSI driver that asks for it, with upstream 1.37.2's message, until the driver registers", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		nodes := createNodes(ctx, "driver", "zone-a", "zone-b", "zone-c")
		driver := "required." + ns + ".example"
		createCSIDriver(ctx, driver, storagev1.CSIDriverSpec{PreventPodSchedulingIfMissing: ptr.To(true)})
		stored, err := cs.StorageV1().CSIDrivers().Get(ctx, driver, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(stored.Spec.PreventPodSchedulingIfMissing).To(HaveValue(BeTrue()), "the API server keeps the field")
		// node 0 has another driver, node 1 gets the driver later, node 2
		// never has a CSINode.
		create(ctx, &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{Name: nodes[0]},
			Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: csiDriver, NodeID: nodes[0]}}},
		})
		name := "required-" + ns
		create(ctx, persistentVolume(ns, name, "", corev1.ReadWriteOnce, corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: name},
		}))
		pvc := claim(ns, "data", "", corev1.ReadWriteOnce)
		pvc.Spec.VolumeName = name
		create(ctx, pvc)
		Eventually(getClaim(ctx, ns, "data")).Should(boundClaim())

		create(ctx, podWithClaims(ns, "app", "data"))
		// Unschedulable, so preemption looks for victims and finds none.
		Eventually(getPod(ctx, ns, "app")).Should(WithTransform(podScheduledMessage, Equal(unschedulableMessage(3, reasonDriverNotInstalled(driver)))))
		Consistently(getPod(ctx, ns, "app")).Should(HaveField("Spec.NodeName", BeEmpty()))

		By("the driver registering on a node, which creates its CSINode, moves the pod there")
		create(ctx, &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{Name: nodes[1]},
			Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, NodeID: nodes[1]}}},
		})
		Expect(waitScheduled(ctx, ns, "app").Spec.NodeName).To(Equal(nodes[1]))
	})

	It("provisions the claim of a generic ephemeral volume on the pod's node", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createNodes(ctx, "ephemeral", "zone-a", "zone-b")
		class := "local-" + ns
		createClass(ctx, localClass(class))
		pod := testenv.Pod(ns, "scratch", schedulerName, "100m", "128Mi")
		pod.Spec.Volumes = []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: claim(ns, "", class, corev1.ReadWriteOnce).Spec},
		}}}}
		create(ctx, pod)

		bound := waitScheduled(ctx, ns, "scratch")
		// The ephemeral volume controller names the claim <pod>-<volume>
		// and makes the pod its owner.
		pvc, err := getClaim(ctx, ns, "scratch-cache")()
		Expect(err).NotTo(HaveOccurred())
		Expect(metav1.IsControlledBy(pvc, bound)).To(BeTrue())
		Eventually(getClaim(ctx, ns, "scratch-cache")).Should(boundClaim())
		pvc, err = getClaim(ctx, ns, "scratch-cache")()
		Expect(err).NotTo(HaveOccurred())
		Expect(hostnameOf(getVolume(ctx, pvc.Spec.VolumeName))).To(Equal([]string{bound.Spec.NodeName}))
	})

	It("moves a pod waiting for a volume as soon as a matching one appears", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		nodes := createNodes(ctx, "static", "zone-a", "zone-b")
		class := "static-" + ns
		createClass(ctx, &storagev1.StorageClass{
			ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "kubernetes.io/no-provisioner",
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		})
		create(ctx, claim(ns, "data", class, corev1.ReadWriteOnce))
		create(ctx, podWithClaims(ns, "app", "data"))
		// UnschedulableAndUnresolvable, so preemption does not look for victims.
		Eventually(getPod(ctx, ns, "app")).Should(WithTransform(podScheduledMessage, Equal(
			"0/2 nodes are available: 2 "+reasonBindConflict+". preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")))

		// The unschedulable pool is flushed after five minutes: only the
		// PersistentVolume event can bring the pod back within the timeout.
		pv := persistentVolume(ns, "static-"+ns, class, corev1.ReadWriteOnce, hostPath("static-"+ns))
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{nodes[1]},
			}}}},
		}}
		create(ctx, pv)
		Expect(waitScheduled(ctx, ns, "app").Spec.NodeName).To(Equal(nodes[1]))
		Eventually(getClaim(ctx, ns, "data")).Should(And(boundClaim(), HaveField("Spec.VolumeName", pv.Name)))
	})

	It("preempts the user of a ReadWriteOncePod claim for a pod of higher priority", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createNodes(ctx, "preempt", "zone-a", "zone-b")
		for name, value := range map[string]int32{"low-" + ns: 0, "high-" + ns: 1000} {
			pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
			create(ctx, pc)
			DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(c.Delete(ctx, pc))).To(Succeed()) })
		}
		name := "rwop-" + ns
		create(ctx, persistentVolume(ns, name, "", corev1.ReadWriteOncePod, hostPath(name)))
		pvc := claim(ns, "data", "", corev1.ReadWriteOncePod)
		pvc.Spec.VolumeName = name
		create(ctx, pvc)
		Eventually(getClaim(ctx, ns, "data")).Should(boundClaim())

		low := podWithClaims(ns, "low", "data")
		low.Spec.PriorityClassName = "low-" + ns
		create(ctx, low)
		waitScheduled(ctx, ns, "low")

		high := podWithClaims(ns, "high", "data")
		high.Spec.PriorityClassName = "high-" + ns
		create(ctx, high)
		waitScheduled(ctx, ns, "high")
		Eventually(func() error {
			_, err := getPod(ctx, ns, "low")()
			return err
		}).Should(Satisfy(apierrors.IsNotFound), "the lower-priority user of the claim is evicted")
	})

	It("keeps a second pod of a ReadWriteOncePod claim in use pending, with upstream's message", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createNodes(ctx, "rwop", "zone-a", "zone-b")
		name := "rwop-" + ns
		create(ctx, persistentVolume(ns, name, "", corev1.ReadWriteOncePod, hostPath(name)))
		pvc := claim(ns, "data", "", corev1.ReadWriteOncePod)
		pvc.Spec.VolumeName = name
		create(ctx, pvc)
		Eventually(getClaim(ctx, ns, "data")).Should(boundClaim())

		create(ctx, podWithClaims(ns, "first", "data"))
		waitScheduled(ctx, ns, "first")
		Eventually(getPod(ctx, ns, "first")).Should(HaveField("Status.Phase", corev1.PodRunning))

		create(ctx, podWithClaims(ns, "second", "data"))
		Eventually(getPod(ctx, ns, "second")).Should(WithTransform(podScheduledMessage, Equal(unschedulableMessage(2, reasonRWOPConflict))))
		Consistently(getPod(ctx, ns, "second")).Should(HaveField("Spec.NodeName", BeEmpty()))
	})
})
