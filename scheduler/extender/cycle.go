package extender

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
)

// Name is the pseudo plugin put in a pod's UnschedulablePlugins when
// extenders rejected some nodes (upstream's framework.ExtenderName).
const Name = "Extender"

// FindNodesThatPass is upstream's findNodesThatPassExtenders: the
// extenders interested in pod filter the feasible nodes one after the
// other, each seeing only what the previous ones kept. Refused nodes get
// the extender's reason in statuses (failedAndUnresolvable wins over
// failed). A failing extender fails the cycle unless it is ignorable.
func FindNodesThatPass(ctx context.Context, exts []framework.Extender, pod *v1.Pod, feasible []*framework.NodeInfo, statuses *framework.NodeToStatus) ([]*framework.NodeInfo, error) {
	logger := klog.FromContext(ctx)
	for _, e := range exts {
		if len(feasible) == 0 {
			break
		}
		if !e.IsInterested(pod) {
			continue
		}
		// Extenders that return UnschedulableAndUnresolvable are best
		// listed first: preemption then skips those nodes.
		list, failed, failedAndUnresolvable, err := e.Filter(ctx, pod, feasible)
		if err != nil {
			if e.IsIgnorable() {
				logger.Info("Skipping extender as it returned error and has ignorable flag set", "extender", e, "err", err)
				continue
			}
			return nil, err
		}
		for name, msg := range failedAndUnresolvable {
			statuses.Set(name, framework.NewStatus(framework.UnschedulableAndUnresolvable, msg))
		}
		for name, msg := range failed {
			if _, found := failedAndUnresolvable[name]; found {
				continue
			}
			statuses.Set(name, framework.NewStatus(framework.Unschedulable, msg))
		}
		feasible = list
	}
	return feasible, nil
}

// AddScores is the extender part of upstream's prioritizeNodes: the
// extenders interested in pod score nodes concurrently, and each score,
// times the extender's weight and scaled from extenderv1.MaxExtenderPriority
// to framework.MaxNodeScore, is added to the node's entry in scores
// (scores[i] belongs to nodes[i]). An extender that fails gives no scores.
func AddScores(ctx context.Context, exts []framework.Extender, pod *v1.Pod, nodes []*framework.NodeInfo, scores []framework.NodePluginScores) {
	logger := klog.FromContext(ctx)
	loggerV10 := logger.V(10)
	index := make(map[string]int, len(nodes))
	for i, n := range nodes {
		index[n.Node().Name] = i
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, e := range exts {
		if !e.IsInterested(pod) {
			continue
		}
		wg.Go(func() {
			list, weight, err := e.Prioritize(ctx, pod, nodes)
			if err != nil {
				// As upstream: other extenders and the plugins decide.
				logger.V(5).Info("Failed to run extender's priority function. No score given by this extender.", "error", err, "pod", klog.KObj(pod), "extender", e.Name())
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, hp := range list {
				if loggerV10.Enabled() {
					loggerV10.Info("Extender scored node for pod", "pod", klog.KObj(pod), "extender", e.Name(), "node", hp.Host, "score", hp.Score)
				}
				i, ok := index[hp.Host]
				if !ok {
					// Upstream drops scores of nodes it did not send.
					continue
				}
				final := hp.Score * weight * (framework.MaxNodeScore / extenderv1.MaxExtenderPriority)
				scores[i].Scores = append(scores[i].Scores, framework.PluginScore{Name: e.Name(), Score: final})
				scores[i].TotalScore += final
				// Upstream gives every node an extender scored a random
				// tie-breaker; nodes scored by plugins alone keep 0.
				scores[i].Randomizer = rand.Int()
			}
		})
	}
	wg.Wait()
}

// Bind is upstream's extendersBinding: the first binding extender
// interested in pod binds it. bound is false when none did, and the Bind
// plugins are to run; an ignorable binder that fails is skipped.
func Bind(ctx context.Context, exts []framework.Extender, pod *v1.Pod, node string) (bound bool, err error) {
	logger := klog.FromContext(ctx)
	for _, e := range exts {
		if !e.IsBinder() || !e.IsInterested(pod) {
			continue
		}
		err := e.Bind(ctx, pod, node)
		if err != nil && e.IsIgnorable() {
			logger.Info("Skipping extender in bind as it returned error and has ignorable flag set", "extender", e, "err", err)
			continue
		}
		return true, err
	}
	return false, nil
}

// ProcessPreemption is upstream's callExtenders of preemption: the
// extenders interested in pod that support preemption narrow the
// candidates (victims per node) one after the other, each choosing among
// what the previous one kept. A failing extender, or one whose reply
// reaches beyond what it was sent, fails preemption unless it is
// ignorable; a node left without victims is an error, or dropped for an
// ignorable extender.
func ProcessPreemption(ctx context.Context, exts []framework.Extender, pod *v1.Pod, victims map[string]*extenderv1.Victims) (map[string]*extenderv1.Victims, error) {
	logger := klog.FromContext(ctx)
	for _, e := range exts {
		if len(victims) == 0 {
			break
		}
		if !e.SupportsPreemption() || !e.IsInterested(pod) {
			continue
		}
		got, err := e.ProcessPreemption(ctx, pod, victims)
		if err != nil {
			if e.IsIgnorable() {
				logger.V(2).Info("Skipped extender as it returned error and has ignorable flag set", "extender", e.Name(), "err", err)
				continue
			}
			return nil, err
		}
		for nodeName, v := range got {
			if v == nil || len(v.Pods) == 0 {
				if e.IsIgnorable() {
					delete(got, nodeName)
					logger.V(2).Info("Ignored node for which the extender didn't report victims", "node", klog.KRef("", nodeName), "extender", e.Name())
					continue
				}
				return nil, fmt.Errorf("expected at least one victim pod on node %q", nodeName)
			}
		}
		victims = got
	}
	return victims, nil
}
