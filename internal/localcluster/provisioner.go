package localcluster

import (
	"context"
	"errors"
	"path"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	storagelistersv1 "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// SimulatedProvisionerName is the provisioner a StorageClass names for its
// claims to be served by the simulated local-volume provisioner.
const SimulatedProvisionerName = "local.profile-scheduler.dev/simulated"

// simulatedVolumeRoot is where the simulated volumes claim to live on their
// node; nothing is created there.
const simulatedVolumeRoot = "/mnt/profile-scheduler-simulated"

// SimulatedProvisioner stands in for a local-volume provisioner (such as
// rancher's local-path-provisioner) running on the simulated nodes, the
// way Kubelet stands in for the kubelets: nothing is stored anywhere.
//
// It follows the protocol of an external provisioner with delayed binding.
// A claim of a StorageClass whose provisioner is SimulatedProvisionerName
// and whose volumeBindingMode is WaitForFirstConsumer waits until the
// scheduler picks a node for a pod using it and records that node in the
// claim's volume.kubernetes.io/selected-node annotation. The PV binder of
// kube-controller-manager then finds no volume for it, sees a provisioner
// it does not know and names it in the claim's
// volume.kubernetes.io/storage-provisioner annotation. Only then does this
// provisioner create a local PersistentVolume on that node: the claim's
// size, access modes and volume mode, the class's reclaim policy and mount
// options, node affinity to the node's kubernetes.io/hostname, and a
// claimRef to the claim, which the PV binder completes by binding the two.
// When a volume it provisioned with reclaim policy Delete is released, it
// deletes it, as the PV binder leaves that to external provisioners.
type SimulatedProvisioner struct {
	client  kubernetes.Interface
	claims  listersv1.PersistentVolumeClaimLister
	volumes listersv1.PersistentVolumeLister
	nodes   listersv1.NodeLister
	classes storagelistersv1.StorageClassLister
	queue   workqueue.TypedRateLimitingInterface[provisionerKey]
	synced  []cache.InformerSynced
}

// provisionerKey is a claim to provision (Namespace set) or a volume to
// reclaim (Namespace empty: volumes are cluster-scoped).
type provisionerKey = types.NamespacedName

// NewSimulatedProvisioner returns a simulated provisioner; factory must not
// be started yet.
func NewSimulatedProvisioner(client kubernetes.Interface, factory informers.SharedInformerFactory) (*SimulatedProvisioner, error) {
	claims := factory.Core().V1().PersistentVolumeClaims()
	volumes := factory.Core().V1().PersistentVolumes()
	nodes := factory.Core().V1().Nodes()
	classes := factory.Storage().V1().StorageClasses()
	p := &SimulatedProvisioner{
		client:  client,
		claims:  claims.Lister(),
		volumes: volumes.Lister(),
		nodes:   nodes.Lister(),
		classes: classes.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[provisionerKey](),
			workqueue.TypedRateLimitingQueueConfig[provisionerKey]{Name: "simulated-provisioner"}),
		synced: []cache.InformerSynced{
			claims.Informer().HasSynced, volumes.Informer().HasSynced,
			nodes.Informer().HasSynced, classes.Informer().HasSynced,
		},
	}
	enqueueClaim := func(obj any) {
		if claim, ok := obj.(*corev1.PersistentVolumeClaim); ok && claim.Spec.VolumeName == "" {
			p.queue.Add(provisionerKey{Namespace: claim.Namespace, Name: claim.Name})
		}
	}
	if _, err := claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueClaim,
		UpdateFunc: func(_, obj any) { enqueueClaim(obj) },
	}); err != nil {
		return nil, err
	}
	enqueueVolume := func(obj any) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Annotations[volume.AnnDynamicallyProvisioned] == SimulatedProvisionerName {
			p.queue.Add(provisionerKey{Name: pv.Name})
		}
	}
	if _, err := volumes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueVolume,
		UpdateFunc: func(_, obj any) { enqueueVolume(obj) },
	}); err != nil {
		return nil, err
	}
	return p, nil
}

// Run works until ctx ends; start the informer factory first.
func (p *SimulatedProvisioner) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("simulated-provisioner")
	ctx = klog.NewContext(ctx, logger)
	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), p.synced...) {
		return
	}
	for {
		key, quit := p.queue.Get()
		if quit {
			return
		}
		var err error
		if key.Namespace == "" {
			err = p.reclaim(ctx, key.Name)
		} else {
			err = p.provision(ctx, key)
		}
		if err != nil && ctx.Err() == nil {
			logger.V(2).Info("Retrying", "key", key, "err", err)
			p.queue.AddRateLimited(key)
		} else {
			p.queue.Forget(key)
		}
		p.queue.Done(key)
	}
}

func (p *SimulatedProvisioner) provision(ctx context.Context, key provisionerKey) error {
	claim, err := p.claims.PersistentVolumeClaims(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	className := volume.GetPersistentVolumeClaimClass(claim)
	if className == "" {
		return nil
	}
	class, err := p.classes.Get(className)
	if apierrors.IsNotFound(err) {
		// A claim may name a class created later; the claim's next
		// update (the PV binder annotates it) brings it back.
		return nil
	}
	if err != nil {
		return err
	}
	nodeName, ok := claimToProvision(claim, class)
	if !ok {
		return nil
	}
	hostname := nodeName
	if node, err := p.nodes.Get(nodeName); err == nil && node.Labels[corev1.LabelHostname] != "" {
		hostname = node.Labels[corev1.LabelHostname]
	} else if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	pv, err := volumeForClaim(claim, class, hostname)
	if err != nil {
		// Nothing a retry can change until the claim changes.
		klog.FromContext(ctx).Info("Cannot provision a volume for the claim", "pvc", klog.KObj(claim), "err", err)
		return nil
	}
	if _, err := p.volumes.Get(pv.Name); err == nil {
		return nil
	}
	_, err = p.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Provisioned a simulated local volume", "pvc", klog.KObj(claim), "pv", pv.Name, "node", nodeName)
	return nil
}

func (p *SimulatedProvisioner) reclaim(ctx context.Context, name string) error {
	pv, err := p.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !volumeToDelete(pv) {
		return nil
	}
	err = p.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pv.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Deleted a released simulated local volume", "pv", pv.Name)
	}
	return err
}

// claimToProvision returns the node to provision claim's volume on, when
// this provisioner is to provision it now: the claim is unbound, of a
// class of this provisioner with delayed binding, the scheduler has
// selected a node for it, and the PV binder has handed it to this
// provisioner.
func claimToProvision(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) (string, bool) {
	if claim.Spec.VolumeName != "" || claim.DeletionTimestamp != nil {
		return "", false
	}
	if class.Provisioner != SimulatedProvisionerName ||
		class.VolumeBindingMode == nil || *class.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		return "", false
	}
	if provisioner(claim) != SimulatedProvisionerName {
		return "", false
	}
	node := claim.Annotations[volume.AnnSelectedNode]
	return node, node != ""
}

// provisioner is the provisioner the PV binder handed claim to, from the
// GA annotation or, as external provisioners still accept, the beta one.
func provisioner(claim *corev1.PersistentVolumeClaim) string {
	if name, ok := claim.Annotations[volume.AnnStorageProvisioner]; ok {
		return name
	}
	return claim.Annotations[volume.AnnBetaStorageProvisioner]
}

// volumeForClaim is the local PersistentVolume provisioned for claim of
// class on the node whose kubernetes.io/hostname label is hostname. It is
// named after the claim's UID, as external provisioners name theirs, so a
// retried provisioning finds the volume it created before.
func volumeForClaim(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, hostname string) (*corev1.PersistentVolume, error) {
	size, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok || size.IsZero() {
		return nil, errors.New("the claim requests no storage")
	}
	if claim.UID == "" {
		return nil, errors.New("the claim has no UID")
	}
	if len(claim.Spec.AccessModes) == 0 {
		return nil, errors.New("the claim has no access modes")
	}
	if claim.Spec.Selector != nil {
		// As external provisioners: a selector asks for an existing volume.
		return nil, errors.New("claims with a selector are not provisioned")
	}
	name := "pvc-" + string(claim.UID)
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{volume.AnnDynamicallyProvisioned: SimulatedProvisionerName},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size.DeepCopy()},
			AccessModes:                   append([]corev1.PersistentVolumeAccessMode(nil), claim.Spec.AccessModes...),
			VolumeMode:                    claim.Spec.VolumeMode,
			StorageClassName:              class.Name,
			PersistentVolumeReclaimPolicy: reclaim,
			MountOptions:                  append([]string(nil), class.MountOptions...),
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				Local: &corev1.LocalVolumeSource{Path: path.Join(simulatedVolumeRoot, name)},
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{hostname},
				}}}},
			}},
			ClaimRef: &corev1.ObjectReference{
				Kind:       "PersistentVolumeClaim",
				APIVersion: "v1",
				Namespace:  claim.Namespace,
				Name:       claim.Name,
				UID:        claim.UID,
			},
		},
	}
	if pv.Spec.VolumeMode == nil {
		pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	}
	return pv, nil
}

// volumeToDelete says whether pv is a volume of this provisioner that its
// claim released and whose reclaim policy asks for deletion.
func volumeToDelete(pv *corev1.PersistentVolume) bool {
	return pv.Annotations[volume.AnnDynamicallyProvisioned] == SimulatedProvisionerName &&
		pv.DeletionTimestamp == nil &&
		pv.Status.Phase == corev1.VolumeReleased &&
		pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete
}
