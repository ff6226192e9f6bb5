package operator_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"

	"github.com/schedprofiles/profile-scheduler/internal/operator"
)

// clusterPrefix is where a cluster-management proxy serves one cluster's
// API, as Rancher's /k8s/clusters/ID.
const clusterPrefix = "/k8s/clusters/c-1"

// prefixingProxy serves the API server of cfg under clusterPrefix on
// loopback, with cfg's credentials, as a cluster-management proxy does.
func prefixingProxy(cfg *rest.Config) *httptest.Server {
	GinkgoHelper()
	target, err := url.Parse(cfg.Host)
	Expect(err).NotTo(HaveOccurred())
	transport, err := rest.TransportFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	proxy := &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.URL.Path = strings.TrimPrefix(r.In.URL.Path, clusterPrefix)
			r.Out.URL.RawPath = ""
		},
	}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, clusterPrefix+"/") {
			http.NotFound(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	DeferCleanup(server.Close)
	return server
}

var _ = Describe("The leader's Lease fence behind an API server URL with a path", func() {
	It("opens when the leader renews its Lease through the prefix", func() {
		ns := namespace()
		proxied := &rest.Config{Host: prefixingProxy(cfg).URL + clusterPrefix}
		fence, err := operator.NewLeaseFence(proxied, 10*time.Second, clock.RealClock{})
		Expect(err).NotTo(HaveOccurred())
		// As main.go wires them: the elector's client observes renewals,
		// every other client is guarded.
		electionCfg, guardedCfg := rest.CopyConfig(proxied), rest.CopyConfig(proxied)
		electionCfg.Wrap(fence.ObserveRenewals)
		guardedCfg.Wrap(fence.Guard)
		election, err := kubernetes.NewForConfig(electionCfg)
		Expect(err).NotTo(HaveOccurred())
		guarded, err := kubernetes.NewForConfig(guardedCfg)
		Expect(err).NotTo(HaveOccurred())

		write := func(name string) error {
			_, err := guarded.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			return err
		}
		Expect(write("before")).To(MatchError(ContainSubstring("not sent: this replica has not renewed its leader Lease")),
			"a replica that holds no Lease writes")

		lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, "fence", election.CoreV1(), election.CoordinationV1(),
			resourcelock.ResourceLockConfig{Identity: "replica-1"})
		Expect(err).NotTo(HaveOccurred())
		leCtx, cancel := context.WithCancel(ctx)
		DeferCleanup(cancel)
		leading := make(chan struct{})
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          lock,
			LeaseDuration: 15 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   time.Second,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { close(leading) },
				OnStoppedLeading: func() {},
			},
		})
		Expect(err).NotTo(HaveOccurred())
		go elector.Run(leCtx)
		Eventually(leading).Should(BeClosed())
		Expect(fence.Open()).To(BeTrue(), "the Lease was written through the prefix, and the fence stayed closed")
		Expect(write("leader")).To(Succeed())
	})
})
