// Package latency_test measures, on a real API server with the whole
// operator running, how long the two user-facing loops take: a profile
// update until the first pod is placed by the new instance, and a decision
// on a WaitingPod until the pod is bound. Run with
//
//	go test ./test/latency -run '^$' -bench . -benchtime 20x
//
// Each benchmark reports the median and p99 of its iterations in ms.
package latency_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

var (
	k8sClient client.Client
	// runs numbers the objects of each benchmark run: the testing package
	// calls a benchmark more than once (b.N = 1 first).
	runs int
)

// TestMain starts the control plane and the operator only when benchmarks
// run, so `go test ./...` does not pay for them.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	// Quiet: benchmarks print figures, not logs.
	klog.SetLogger(logr.Discard())
	ctrl.SetLogger(logr.Discard())
	env, err := testenv.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stop, err := startOperator(cfg)
	code := 1
	if err == nil {
		k8sClient, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	}
	if err == nil {
		code = m.Run()
	} else {
		fmt.Fprintln(os.Stderr, err)
	}
	if stop != nil {
		stop()
	}
	_ = env.Stop()
	os.Exit(code)
}

func startOperator(cfg *rest.Config) (func(), error) {
	// A real operator would raise its client limits for throughput; these
	// benchmarks measure latency one pod at a time, so defaults do.
	running, err := testenv.StartOperator(context.Background(), cfg, testenv.OperatorOptions{
		Operator: operator.Options{WaitingPodRetention: time.Second},
	})
	if err != nil {
		return nil, err
	}
	return func() {
		if err := running.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "operator:", err)
		}
	}, nil
}

// pollInterval is how often the benchmarks look at the API server; it bounds
// the resolution of the figures.
const pollInterval = 2 * time.Millisecond

func waitFor(b *testing.B, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(pollInterval)
	}
}

func createNodes(b *testing.B, prefix string, count int, labels map[string]string) {
	b.Helper()
	for i := range count {
		if err := testenv.CreateNode(context.Background(), k8sClient, testenv.Node(fmt.Sprintf("%s-%d", prefix, i), "64", "256Gi", labels)); err != nil {
			b.Fatal(err)
		}
	}
}

func namespace(b *testing.B) string {
	b.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "latency-"}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		b.Fatal(err)
	}
	return ns.Name
}

func nodeOf(pod *corev1.Pod) string {
	p := &corev1.Pod{}
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(pod), p); err != nil {
		return ""
	}
	return p.Spec.NodeName
}

// reportPercentiles reports the median and p99 of samples as
// "ms-<name>median" and "ms-<name>p99".
func reportPercentiles(b *testing.B, name string, samples []time.Duration) {
	slices.Sort(samples)
	at := func(q float64) float64 {
		return float64(samples[int(q*float64(len(samples)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.5), "ms-"+name+"median")
	b.ReportMetric(at(0.99), "ms-"+name+"p99")
	b.ReportMetric(0, "ns/op") // wall time per op mixes setup in; the percentiles are the figures
}

// poolProfile lets pods only onto nodes labelled pool=<pool>, through
// NodeAffinity's addedAffinity: which pool a pod lands in shows which
// generation of the profile placed it.
func poolProfile(pool string) schedulingv1alpha1.SchedulingProfileSpec {
	args := fmt.Sprintf(`{"addedAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":[%q]}]}]}}}`, pool)
	return schedulingv1alpha1.SchedulingProfileSpec{
		PluginConfig: []schedulingv1alpha1.PluginConfig{{Name: "NodeAffinity", Args: runtime.RawExtension{Raw: []byte(args)}}},
	}
}

// BenchmarkProfileUpdateToFirstPod measures the time from a profile update
// being accepted by the API server to the first pod placed by the instance
// built from it. Each iteration flips the profile between two node pools
// and creates pods until one lands in the new pool.
func BenchmarkProfileUpdateToFirstPod(b *testing.B) {
	ctx := context.Background()
	runs++
	pools := map[string]string{"a": fmt.Sprintf("a%d", runs), "b": fmt.Sprintf("b%d", runs)}
	createNodes(b, "pool-"+pools["a"], 3, map[string]string{"pool": pools["a"]})
	createNodes(b, "pool-"+pools["b"], 3, map[string]string{"pool": pools["b"]})
	name := fmt.Sprintf("flipper-%d", runs)
	sp := &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: poolProfile(pools["a"])}
	if err := k8sClient.Create(ctx, sp); err != nil {
		b.Fatal(err)
	}
	ns := namespace(b)
	pods := 0
	newPod := func() *corev1.Pod {
		pods++
		pod := testenv.Pod(ns, fmt.Sprintf("p-%d", pods), name, "10m", "16Mi")
		if err := k8sClient.Create(ctx, pod); err != nil {
			b.Fatal(err)
		}
		return pod
	}
	// Warm up: the first instance serves.
	first := newPod()
	waitFor(b, "the first pod to bind", func() bool { return nodeOf(first) != "" })

	pool := "a"
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		pool = map[string]string{"a": "b", "b": "a"}[pool]
		// The operator writes the profile's status as it serves it, so an
		// update may race with that write.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, sp); err != nil {
				return err
			}
			sp.Spec = poolProfile(pools[pool])
			return k8sClient.Update(ctx, sp)
		}); err != nil {
			b.Fatal(err)
		}
		accepted := time.Now()
		for {
			pod := newPod()
			var node string
			waitFor(b, "a pod to bind", func() bool { node = nodeOf(pod); return node != "" })
			if strings.HasPrefix(node, "pool-"+pools[pool]+"-") {
				samples = append(samples, time.Since(accepted))
				break
			}
		}
	}
	b.StopTimer()
	reportPercentiles(b, "", samples)
}

// BenchmarkDecisionToBound measures the time from an approval being
// accepted by the API server to the held pod being bound ("ms-median",
// "ms-p99"), and from the pod's creation to its WaitingPod showing it held
// ("ms-held-median", "ms-held-p99").
func BenchmarkDecisionToBound(b *testing.B) {
	ctx := context.Background()
	runs++
	pool := fmt.Sprintf("approve%d", runs)
	createNodes(b, pool, 3, map[string]string{"pool": pool})
	name := fmt.Sprintf("approvals-%d", runs)
	sp := &schedulingv1alpha1.SchedulingProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: schedulingv1alpha1.SchedulingProfileSpec{
			Plugins: &schedulingv1alpha1.Plugins{MultiPoint: schedulingv1alpha1.PluginSet{Enabled: []schedulingv1alpha1.Plugin{{Name: "ManualApproval"}}}},
		},
	}
	if err := k8sClient.Create(ctx, sp); err != nil {
		b.Fatal(err)
	}
	ns := namespace(b)
	samples := make([]time.Duration, 0, b.N)
	held := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		pod := testenv.Pod(ns, fmt.Sprintf("held-%d", i), name, "10m", "16Mi")
		pod.Spec.NodeSelector = map[string]string{"pool": pool}
		if err := k8sClient.Create(ctx, pod); err != nil {
			b.Fatal(err)
		}
		created := time.Now()
		wp := &schedulingv1alpha1.WaitingPod{}
		waitFor(b, "the pod to be held", func() bool {
			return k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), wp) == nil &&
				meta.IsStatusConditionTrue(wp.Status.Conditions, schedulingv1alpha1.WaitingPodWaiting)
		})
		held = append(held, time.Since(created))
		b.StartTimer()

		orig := wp.DeepCopy()
		wp.Spec.Decision = schedulingv1alpha1.DecisionApprove
		wp.Spec.DecidedBy = "benchmark"
		if err := k8sClient.Patch(ctx, wp, client.MergeFrom(orig)); err != nil {
			b.Fatal(err)
		}
		accepted := time.Now()
		waitFor(b, "the approved pod to bind", func() bool { return nodeOf(pod) != "" })
		samples = append(samples, time.Since(accepted))
	}
	b.StopTimer()
	reportPercentiles(b, "", samples)
	reportPercentiles(b, "held-", held)
}
