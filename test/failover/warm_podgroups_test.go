package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/test/outage"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// workloadInformerProxy serves the API server to one replica, and records
// or refuses the list and watch requests of the informers a standby warms
// for the workload API (PodGroups and Workloads). Requests it let through
// before refusing, watches included, keep streaming.
type workloadInformerProxy struct {
	server *httptest.Server

	mu      sync.Mutex
	watched map[string]bool
	refuse  bool
	refused int
}

// workloadCollection returns the resource of a list or watch of
// scheduling.k8s.io/v1beta1 PodGroups or Workloads, in a namespace or in
// all, and "" for any other request.
func workloadCollection(r *http.Request) string {
	rest, ok := strings.CutPrefix(r.URL.Path, "/apis/scheduling.k8s.io/v1beta1/")
	if !ok || r.Method != http.MethodGet {
		return ""
	}
	parts := strings.Split(rest, "/")
	last := parts[len(parts)-1]
	if (len(parts) == 1 || len(parts) == 3 && parts[0] == "namespaces") && (last == "podgroups" || last == "workloads") {
		return last
	}
	return ""
}

func newWorkloadInformerProxy(cfg *rest.Config) *workloadInformerProxy {
	GinkgoHelper()
	target, err := url.Parse(cfg.Host)
	Expect(err).NotTo(HaveOccurred())
	transport, err := rest.TransportFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	proxy := &httputil.ReverseProxy{
		Transport:     transport,
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		FlushInterval: -1,
	}
	p := &workloadInformerProxy{watched: map[string]bool{}}
	p.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if resource := workloadCollection(r); resource != "" {
			p.mu.Lock()
			refuse := p.refuse
			if refuse {
				p.refused++
			} else if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
				p.watched[resource] = true
			}
			p.mu.Unlock()
			if refuse {
				http.Error(w, "refused by the test: a warm cache needs no new list or watch", http.StatusServiceUnavailable)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	DeferCleanup(p.server.Close)
	return p
}

// warm reports whether the replica has watched both resources.
func (p *workloadInformerProxy) warm() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.watched["podgroups"] && p.watched["workloads"]
}

// refuseNew answers every later list or watch of the two with 503.
func (p *workloadInformerProxy) refuseNew() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = true
}

func (p *workloadInformerProxy) refusedRequests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

var _ = Describe("A standby replica's PodGroup cache", func() {

	It("is warm when it takes over: the new leader schedules a pod group while the API server refuses it any new PodGroup or Workload list and watch", func() {
		const (
			ns        = "warm-podgroups"
			scheduler = "warm-gangs"
			lease     = "warm-podgroups.scheduling.schedprofiles.io"
		)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		dir := GinkgoT().TempDir()
		bin, err := testenv.BuildOperator(ctx, dir)
		Expect(err).NotTo(HaveOccurred())

		env, err := testenv.New()
		Expect(err).NotTo(HaveOccurred())
		cfg, err := env.Start()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(env.Stop)
		c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		for i := range 2 {
			Expect(testenv.CreateNode(ctx, c, testenv.Node(fmt.Sprintf("node-%d", i), nodeCPU, nodeMemory, nil))).To(Succeed())
		}
		Expect(c.Create(ctx, &schedulingv1alpha1.SchedulingProfile{
			ObjectMeta: metav1.ObjectMeta{Name: scheduler},
			Spec: schedulingv1alpha1.SchedulingProfileSpec{Plugins: &schedulingv1alpha1.Plugins{
				MultiPoint: schedulingv1alpha1.PluginSet{Enabled: []schedulingv1alpha1.Plugin{{Name: "GangScheduling"}}},
			}},
		})).To(Succeed())

		var replicas []*outage.Replica
		var proxies []*workloadInformerProxy
		for _, name := range []string{"a", "b"} {
			p := newWorkloadInformerProxy(cfg)
			kubeconfig, err := outage.AdminKubeconfig(env, dir, "replica-"+name, p.server.URL)
			Expect(err).NotTo(HaveOccurred())
			r, err := outage.NewReplica(name, bin, filepath.Join(dir, "replica-"+name+".log"), []string{
				"--kubeconfig=" + kubeconfig,
				"--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
				"--leader-elect",
				"--leader-election-id=" + lease,
				"--leader-election-namespace=" + ns,
				"--leader-elect-lease-duration=2s",
				"--leader-elect-renew-deadline=1500ms",
				"--leader-elect-retry-period=250ms",
			})
			Expect(err).NotTo(HaveOccurred())
			Expect(r.Start()).To(Succeed())
			DeferCleanup(r.Stop)
			replicas, proxies = append(replicas, r), append(proxies, p)
		}

		By("waiting for a leader, and for the standby to watch PodGroups and Workloads")
		standby := -1
		Eventually(func() int {
			for i, r := range replicas {
				if r.Leads(ctx, lease) {
					standby = 1 - i
				}
			}
			return standby
		}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).ShouldNot(Equal(-1))
		Eventually(proxies[standby].warm).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(BeTrue())
		Eventually(func() bool { return replicas[standby].Ready(ctx) }).WithTimeout(30 * time.Second).Should(BeTrue())

		By("refusing the standby any new PodGroup or Workload list and watch, and killing the leader")
		proxies[standby].refuseNew()
		Expect(replicas[1-standby].Kill()).To(Succeed())

		policy := schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}}
		Expect(c.Create(ctx, &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gang"},
			Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: policy},
		})).To(Succeed())
		for i := range 2 {
			pod := testenv.Pod(ns, fmt.Sprintf("gang-%d", i), scheduler, podCPU, podMemory)
			pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("gang")}
			Expect(c.Create(ctx, pod)).To(Succeed())
		}

		By("the new leader binding the gang from its warm cache")
		Eventually(func() bool { return replicas[standby].Leads(ctx, lease) }).WithTimeout(30 * time.Second).Should(BeTrue())
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(c.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(2))
			for _, p := range pods.Items {
				g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), "pod %s bound", p.Name)
			}
		}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		Expect(proxies[standby].refusedRequests()).To(BeZero(), "the new leader listed or watched PodGroups or Workloads anew")
	})
})
