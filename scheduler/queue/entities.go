package queue

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// What the queue needs of its two kinds of entity, a *QueuedPodInfo or a
// *QueuedPodGroupInfo, where they keep it differently.

// profileOf returns the schedulerName of the profile whose active queue
// holds e: a pod's own, or that of a group's first pod. A group's pods
// normally share it; the pod-group cycle refuses a group whose pods do not.
func profileOf(e framework.QueuedEntityInfo) string {
	if pInfo, ok := e.(*framework.QueuedPodInfo); ok {
		// Without the closure below, which allocates.
		return pInfo.Pod.Spec.SchedulerName
	}
	var name string
	e.ForEachPodInfo(func(pInfo *framework.QueuedPodInfo) bool {
		name = pInfo.Pod.Spec.SchedulerName
		return false
	})
	return name
}

func timestampOf(e framework.QueuedEntityInfo) time.Time {
	if g, ok := e.(*framework.QueuedPodGroupInfo); ok {
		return g.Timestamp
	}
	return e.(*framework.QueuedPodInfo).Timestamp
}

// setInitialAttemptTimestamp sets when e first entered the active queue,
// where not set yet.
func setInitialAttemptTimestamp(e framework.QueuedEntityInfo, now time.Time) {
	if g, ok := e.(*framework.QueuedPodGroupInfo); ok {
		g.SetInitialAttemptTimestamp(now)
		return
	}
	if pInfo := e.(*framework.QueuedPodInfo); pInfo.InitialAttemptTimestamp == nil {
		pInfo.InitialAttemptTimestamp = &now
	}
}

func gatingPluginEvents(e framework.QueuedEntityInfo) []framework.ClusterEvent {
	if g, ok := e.(*framework.QueuedPodGroupInfo); ok {
		return g.GatingPluginEvents
	}
	return e.(*framework.QueuedPodInfo).GatingPluginEvents
}

// clearGatingPlugin forgets which plugin gated e (and each of its pods), so
// that a new instance's PreEnqueue plugins are asked in their own order.
func clearGatingPlugin(e framework.QueuedEntityInfo) {
	if g, ok := e.(*framework.QueuedPodGroupInfo); ok {
		g.GatingPlugin, g.GatingPluginEvents = "", nil
	}
	e.ForEachPodInfo(func(pInfo *framework.QueuedPodInfo) bool {
		pInfo.GatingPlugin = ""
		return true
	})
}

// anyPod reports whether a pod of e passes check.
func anyPod(e framework.QueuedEntityInfo, check PreEnqueueCheck) bool {
	if pInfo, ok := e.(*framework.QueuedPodInfo); ok {
		return check(pInfo.Pod)
	}
	found := false
	e.ForEachPodInfo(func(pInfo *framework.QueuedPodInfo) bool {
		found = check(pInfo.Pod)
		return !found
	})
	return found
}

// hasPod reports whether e holds the pod with uid.
func hasPod(e framework.QueuedEntityInfo, uid types.UID) bool {
	found := false
	e.ForEachPodInfo(func(pInfo *framework.QueuedPodInfo) bool {
		found = pInfo.Pod.UID == uid
		return !found
	})
	return found
}
