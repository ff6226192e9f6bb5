// Package controllers holds the reconcilers that connect the API to the
// scheduling loop: SchedulingProfiles become live framework instances and
// WaitingPods carry people's Permit decisions. Reconcilers stay thin; the
// scheduling behaviour lives in scheduler/.
package controllers

// What the operator needs, and nothing more: the scheduler reads nodes, pods
// and the objects its plugins consult, binds pods, reports to pods and events,
// and owns its two kinds; of PodGroups, whose specs are their users', it
// writes the status only. These rules go into the ClusterRole manager-role.
//
// +kubebuilder:rbac:groups=scheduling.schedprofiles.io,resources=schedulingprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.schedprofiles.io,resources=schedulingprofiles/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=scheduling.schedprofiles.io,resources=waitingpods,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=scheduling.schedprofiles.io,resources=waitingpods/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=scheduling.x-k8s.io,resources=podgroups,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.x-k8s.io,resources=podgroups/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces;services;replicationcontrollers,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=replicasets;statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=pods/binding,verbs=create
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch;update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;update
//
// The metrics endpoint lets a scrape through only when the API server
// authenticates its bearer token and authorizes it for GET on /metrics.
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
//
// Volume scheduling, as upstream's system:kube-scheduler and
// system:volume-scheduler roles together: VolumeBinding binds claims to
// volumes (hence patch and update), the other volume plugins and the
// queue's storage events only read.
//
// +kubebuilder:rbac:groups="",resources=persistentvolumes;persistentvolumeclaims,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses;csinodes;csidrivers;csistoragecapacities;volumeattachments,verbs=get;list;watch
//
// Dynamic Resource Allocation, the part of upstream 1.37's
// system:kube-scheduler rules for resource.k8s.io that DynamicResources
// uses: it reads classes, slices and DeviceTaintRules, updates claims (the
// finalizer) and their status (allocation, reservedFor, deallocation in
// PostFilter); resourceclaims/binding is what the API server asks of a
// writer of allocation and reservedFor
// (DRAResourceClaimGranularStatusAuthorization, on by default). Extended
// resources backed by DRA (DRAExtendedResource, on by default) add create
// and delete: PreBind creates the pod's special claim, Unreserve and
// PostFilter delete it; the pod's status.extendedResourceClaimStatus is
// written through pods/status, above.
//
// +kubebuilder:rbac:groups=resource.k8s.io,resources=deviceclasses;resourceslices;devicetaintrules,verbs=get;list;watch
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceclaims,verbs=get;list;watch;update;create;delete
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceclaims/status,verbs=update;patch
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceclaims/binding,verbs=update;patch
//
// Workload-aware scheduling (scheduling.k8s.io/v1beta1), exactly what
// upstream 1.37.2's system:kube-scheduler gets with GenericWorkload on: it
// reads PodGroups and writes their status (the PodGroupScheduled
// condition). Beyond upstream, which does not read Workloads, the operator
// reads them to release a gang held at Permit whose Workload is deleted and
// to warn of a PodGroup naming a missing one.
//
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=podgroups,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=podgroups/status,verbs=patch;update
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=workloads,verbs=get;list;watch
//
// In the operator's own namespace only, through a Role of the same name
// (system is config/rbac's placeholder, which config/default replaces with
// the operator's namespace): the leader-election Lease, which the elector
// gets, creates and updates, and the ControllerRevisions that keep each
// profile's last valid spec. Leases elsewhere are other components' leader
// locks and node heartbeats, and revisions elsewhere belong to DaemonSets
// and StatefulSets: the operator has no business writing either.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=system
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;create;delete,namespace=system
