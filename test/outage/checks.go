// Package outage holds what the suites that take part of the system down
// share (test/failover kills the leader, test/faults restarts the control
// plane, pauses the leader and cuts its connections): operator replicas run
// as real processes, a watch that sees every binding, and the checks that
// must hold after any outage: no pod bound twice, no node overcommitted,
// no pod lost. Each check reads only what the API server shows, so it holds
// the scheduler to account rather than trusting it.
package outage

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// Check lists what breaks the invariants in namespace: a pod bound twice
// (a nodeName change on w, Scheduled events naming two nodes or a node
// other than the pod's) or a node overcommitted in cpu, memory or pod
// count. It returns an error only when it cannot read the cluster.
func Check(ctx context.Context, cs kubernetes.Interface, c client.Client, namespace string, w *PodWatch) ([]string, error) {
	// Events first: the scheduler reports Scheduled once the binding
	// succeeded, so every pod an event names is bound in a later list of
	// pods, while in an earlier one it may not be yet.
	events, err := cs.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, err
	}
	problems := w.NodeChanges()
	problems = append(problems, Overcommitted(pods.Items, nodes.Items)...)
	problems = append(problems, ScheduledElsewhere(events.Items, pods.Items)...)
	return problems, nil
}

// Overcommitted names the nodes whose bound pods request more cpu, memory
// or pods than the node has allocatable. Requests are a pod's effective
// ones (init and sidecar containers, overhead), as the scheduler counts them.
func Overcommitted(pods []corev1.Pod, nodes []corev1.Node) []string {
	used := map[string]corev1.ResourceList{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" {
			continue
		}
		u := used[p.Spec.NodeName]
		if u == nil {
			u = corev1.ResourceList{}
			used[p.Spec.NodeName] = u
		}
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			sum := u[name]
			sum.Add(q)
			u[name] = sum
		}
		count := u[corev1.ResourcePods]
		count.Add(*resource.NewQuantity(1, resource.DecimalSI))
		u[corev1.ResourcePods] = count
	}
	var problems []string
	for _, n := range nodes {
		for name, q := range used[n.Name] {
			if alloc := n.Status.Allocatable[name]; q.Cmp(alloc) > 0 {
				problems = append(problems, fmt.Sprintf("node %s overcommitted: %s %s requested, %s allocatable", n.Name, name, q.String(), alloc.String()))
			}
		}
	}
	slices.Sort(problems)
	return problems
}

// ScheduledElsewhere names the pods with Scheduled events for two
// different nodes, or for a node other than the one they are bound to.
func ScheduledElsewhere(events []eventsv1.Event, pods []corev1.Pod) []string {
	nodeOf := map[types.UID]string{}
	for _, p := range pods {
		nodeOf[p.UID] = p.Spec.NodeName
	}
	var problems []string
	scheduledOn := map[types.UID]string{}
	for _, e := range events {
		if e.Reason != "Scheduled" {
			continue
		}
		pod := e.Regarding.Namespace + "/" + e.Regarding.Name
		// "Successfully assigned <namespace>/<pod> to <node>", as upstream.
		_, node, ok := strings.Cut(e.Note, " to ")
		if !ok {
			problems = append(problems, fmt.Sprintf("pod %s has a Scheduled event naming no node: %q", pod, e.Note))
			continue
		}
		if prev, ok := scheduledOn[e.Regarding.UID]; ok && prev != node {
			problems = append(problems, fmt.Sprintf("pod %s has Scheduled events for nodes %s and %s", pod, prev, node))
		}
		scheduledOn[e.Regarding.UID] = node
		if bound := nodeOf[e.Regarding.UID]; bound != node {
			problems = append(problems, fmt.Sprintf("pod %s has a Scheduled event for node %s but is bound to %q", pod, node, bound))
		}
	}
	return problems
}

// Unaccounted names the pods that are neither bound nor pending with a
// reason: PodScheduled=False with a reason and a message, as the scheduler
// writes for every pod it could not place. A pod in neither state was lost.
func Unaccounted(pods []corev1.Pod) []string {
	var lost []string
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			continue
		}
		i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled })
		if i < 0 {
			lost = append(lost, fmt.Sprintf("pod %s/%s is not bound and has no PodScheduled condition", p.Namespace, p.Name))
			continue
		}
		if c := p.Status.Conditions[i]; c.Status != corev1.ConditionFalse || c.Reason == "" || c.Message == "" {
			lost = append(lost, fmt.Sprintf("pod %s/%s is not bound and its PodScheduled condition gives no reason: %s=%s %q %q", p.Namespace, p.Name, c.Type, c.Status, c.Reason, c.Message))
		}
	}
	slices.Sort(lost)
	return lost
}

// AdminKubeconfig writes a kubeconfig of a cluster administrator of env
// into dir/name.kubeconfig, for operator replicas, and returns its path.
// A non-empty server replaces the API server's address in it, to send the
// replica through a proxy; the API server's certificate names 127.0.0.1,
// so a proxy on loopback keeps TLS verified end to end.
func AdminKubeconfig(env *envtest.Environment, dir, name, server string) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "profile-scheduler", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	if server != "" {
		cfg, err := clientcmd.Load(data)
		if err != nil {
			return "", err
		}
		for _, cluster := range cfg.Clusters {
			cluster.Server = server
		}
		if data, err = clientcmd.Write(*cfg); err != nil {
			return "", err
		}
	}
	return testenv.WriteKubeconfig(dir, name, data)
}
