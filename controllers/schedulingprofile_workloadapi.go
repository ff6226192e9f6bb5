package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
)

// workloadResources are the resources of scheduling.k8s.io/v1beta1 a
// workload-aware profile reads.
var workloadResources = []string{"workloads", "podgroups"}

// DefaultWorkloadAPIPeriod is how often the operator asks the API server
// again whether it serves the workload API, while some profile is
// workload-aware: a profile waiting for the API is built within this long
// of the API server serving it.
const DefaultWorkloadAPIPeriod = 10 * time.Second

// WorkloadAPI says whether the cluster's API server serves
// scheduling.k8s.io/v1beta1 Workloads and PodGroups, as discovery says.
// The answer is cached; the SchedulingProfile reconciler refreshes it
// periodically while some profile is workload-aware (WithWorkloadAPI). It
// is safe for concurrent use.
type WorkloadAPI struct {
	discovery discovery.DiscoveryInterfaceWithContext

	// mu guards known and missing.
	mu    sync.Mutex
	known bool
	// missing are the workloadResources not served.
	missing []string
}

// NewWorkloadAPI returns a WorkloadAPI that asks d.
func NewWorkloadAPI(d discovery.DiscoveryInterface) *WorkloadAPI {
	return &WorkloadAPI{discovery: discovery.ToDiscoveryInterfaceWithContext(d)}
}

// Missing returns the workload resources the API server does not serve,
// none when it serves them all: the cached answer, or discovery's when
// there is none yet.
func (w *WorkloadAPI) Missing(ctx context.Context) ([]string, error) {
	w.mu.Lock()
	known, missing := w.known, w.missing
	w.mu.Unlock()
	if known {
		return missing, nil
	}
	if _, err := w.refresh(ctx); err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.missing, nil
}

// refresh asks discovery again, and says whether the answer changed.
func (w *WorkloadAPI) refresh(ctx context.Context) (bool, error) {
	missing := slices.Clone(workloadResources)
	list, err := w.discovery.ServerResourcesForGroupVersionWithContext(ctx, schedulingv1beta1.SchemeGroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
		// The group version is not served at all.
	case err != nil:
		return false, fmt.Errorf("asking the API server whether it serves %s: %w", schedulingv1beta1.SchemeGroupVersion, err)
	default:
		missing = slices.DeleteFunc(missing, func(name string) bool {
			return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == name })
		})
	}
	if len(missing) == 0 {
		missing = nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	changed := !w.known || !slices.Equal(w.missing, missing)
	w.known, w.missing = true, missing
	return changed, nil
}

// WithWorkloadAPI has workload-aware profiles built only while the API
// server serves the workload API, as api says, which is asked again every
// period (DefaultWorkloadAPIPeriod when 0) while some profile is
// workload-aware. Before such a profile is built, served (when not nil)
// starts what reads the API (the scheduling loop's PodGroup informer) and
// waits for it: nothing may watch the API before the API server serves it.
// Without it the API is not checked.
func WithWorkloadAPI(api *WorkloadAPI, period time.Duration, served func(context.Context) error) ProfileOption {
	if period <= 0 {
		period = DefaultWorkloadAPIPeriod
	}
	return func(r *SchedulingProfileReconciler) {
		r.workloadAPI, r.workloadAPIPeriod, r.workloadAPIServed = api, period, served
	}
}

// noteWorkloadAware records whether the current spec of profile objName
// is workload-aware, so that a change of the workload API has it built
// again.
func (r *SchedulingProfileReconciler) noteWorkloadAware(objName string, aware bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if aware {
		r.workloadAware.Insert(objName)
	} else {
		r.workloadAware.Delete(objName)
	}
}

// workloadAPIRefusal says why plan may not be built yet: it is
// workload-aware and the API server does not serve the workload API.
func (r *SchedulingProfileReconciler) workloadAPIRefusal(ctx context.Context, plan *profilebuild.Plan) (profilebuild.Refusals, error) {
	if r.workloadAPI == nil || !plan.WorkloadAware {
		return nil, nil
	}
	missing, err := r.workloadAPI.Missing(ctx)
	if err != nil {
		return nil, err
	}
	if len(missing) == 0 {
		if r.workloadAPIServed == nil {
			return nil, nil
		}
		return nil, r.workloadAPIServed(ctx)
	}
	return profilebuild.Refusals{{
		Reason: schedulingv1alpha1.ReasonWorkloadAPINotServed,
		Field:  "spec.plugins",
		Detail: fmt.Sprintf("it is workload-aware (it enables GangScheduling, TopologyPlacementGenerator or PodGroupPodsCount), and the cluster's API server does not serve %s %s; "+
			"start kube-apiserver with --runtime-config=%s=true and --feature-gates=GenericWorkload=true (with TopologyAwareWorkloadScheduling=true too for topology-aware placement), and the profile is built once it serves them",
			schedulingv1beta1.SchemeGroupVersion, strings.Join(missing, " and "), schedulingv1beta1.SchemeGroupVersion),
	}}, nil
}

// watchWorkloadAPI asks the API server again every period, while some
// profile is workload-aware, and has those profiles reconciled when the
// answer changes: one waiting for the API is built once it is served.
// It runs on the elected leader, as the reconciler.
func (r *SchedulingProfileReconciler) watchWorkloadAPI(mgr manager.Manager) error {
	if r.workloadAPI == nil {
		return nil
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		ticker := time.NewTicker(r.workloadAPIPeriod)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-ticker.C:
			}
			r.mu.Lock()
			names := r.workloadAware.UnsortedList()
			r.mu.Unlock()
			if len(names) == 0 {
				continue
			}
			changed, err := r.workloadAPI.refresh(ctx)
			if err != nil {
				// The API server may be restarting: the cached answer
				// stands until it answers.
				klog.FromContext(ctx).V(2).Info("Cannot tell whether the API server serves the workload API", "err", err)
				continue
			}
			if !changed {
				continue
			}
			for _, name := range names {
				select {
				case r.wake <- event.GenericEvent{Object: &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: name}}}:
				case <-ctx.Done():
					return nil
				}
			}
		}
	}))
}

// WarmPodGroups returns a Runnable that, on every replica, leader or
// standby, asks the API server every period (DefaultWorkloadAPIPeriod when
// 0) whether it serves the workload API and, once it does, calls start (the
// scheduling loop's StartPodGroupInformer): a standby then holds PodGroups
// as warm as it holds pods and nodes, and a failover does not start with
// a cold PodGroup cache. Nothing waits for it, so a replica is ready and
// ordinary profiles are built whether or not the API is served. Add it
// only with the GenericWorkload gate on. It asks d through a WorkloadAPI
// of its own: sharing the reconciler's would hide from it the change that
// has waiting profiles built.
func WarmPodGroups(d discovery.DiscoveryInterface, period time.Duration, start func(context.Context) error) manager.Runnable {
	if period <= 0 {
		period = DefaultWorkloadAPIPeriod
	}
	return warmPodGroups{api: NewWorkloadAPI(d), period: period, start: start}
}

type warmPodGroups struct {
	api    *WorkloadAPI
	period time.Duration
	start  func(context.Context) error
}

var _ manager.LeaderElectionRunnable = warmPodGroups{}

// NeedLeaderElection is false: standbys keep their caches warm.
func (warmPodGroups) NeedLeaderElection() bool { return false }

func (r warmPodGroups) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	ticker := time.NewTicker(r.period)
	defer ticker.Stop()
	for {
		if _, err := r.api.refresh(ctx); err != nil {
			logger.V(2).Info("Cannot tell yet whether the API server serves the workload API", "err", err)
		} else if missing, _ := r.api.Missing(ctx); len(missing) == 0 {
			// Missing answers from the cache refresh just filled.
			if err := r.start(ctx); err != nil {
				logger.Error(err, "Cannot start the PodGroup informer; retrying")
			} else {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}
