// Package extender calls HTTP scheduler extenders on upstream's wire
// protocol (k8s.io/kube-scheduler/extender/v1), with upstream's
// HTTPExtender semantics: a JSON POST to urlPrefix/verb per call, bounded by
// httpTimeout; node names only for nodeCacheCapable extenders;
// managedResources deciding which pods an extender sees; ignorable
// extenders skipped when they fail. A profile's extenders are built
// together by New, which validates them as upstream validates a
// KubeSchedulerConfiguration's extenders.
package extender
