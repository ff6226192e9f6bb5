package scheduling_test

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	configv1 "k8s.io/kube-scheduler/config/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/controllers"
	"github.com/schedprofiles/profile-scheduler/internal/profilebuild"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// extenderServer is an HTTP extender on loopback speaking upstream's wire
// protocol. filter keeps the nodes in keep; prioritize gives favourite
// the top score; bind writes the binding to the API server, as a real
// binding extender must.
type extenderServer struct {
	*httptest.Server
	mu        sync.Mutex
	keep      sets.Set[string]
	favourite string
	bound     map[types.UID]string
}

func newExtenderServer(keep ...string) *extenderServer {
	e := &extenderServer{keep: sets.New(keep...), bound: map[types.UID]string{}}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	DeferCleanup(e.Close)
	return e
}

func (e *extenderServer) set(keep []string, favourite string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.keep, e.favourite = sets.New(keep...), favourite
}

func (e *extenderServer) boundTo(uid types.UID) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.bound[uid]
}

func (e *extenderServer) serve(w http.ResponseWriter, r *http.Request) {
	defer GinkgoRecover()
	e.mu.Lock()
	keep, favourite := e.keep, e.favourite
	e.mu.Unlock()
	var reply any
	switch strings.TrimPrefix(r.URL.Path, "/") {
	case "filter":
		var args extenderv1.ExtenderArgs
		Expect(json.NewDecoder(r.Body).Decode(&args)).To(Succeed())
		res := extenderv1.ExtenderFilterResult{Nodes: &v1.NodeList{}, FailedNodes: extenderv1.FailedNodesMap{}}
		for _, n := range args.Nodes.Items {
			if keep.Has(n.Name) {
				res.Nodes.Items = append(res.Nodes.Items, n)
			} else {
				res.FailedNodes[n.Name] = "node(s) refused by the test extender"
			}
		}
		reply = res
	case "prioritize":
		var args extenderv1.ExtenderArgs
		Expect(json.NewDecoder(r.Body).Decode(&args)).To(Succeed())
		Expect(args.NodeNames).NotTo(BeNil(), "a nodeCacheCapable extender gets names only")
		Expect(args.Nodes).To(BeNil())
		var list extenderv1.HostPriorityList
		for _, n := range *args.NodeNames {
			hp := extenderv1.HostPriority{Host: n}
			if n == favourite {
				hp.Score = extenderv1.MaxExtenderPriority
			}
			list = append(list, hp)
		}
		reply = list
	case "bind":
		var args extenderv1.ExtenderBindingArgs
		Expect(json.NewDecoder(r.Body).Decode(&args)).To(Succeed())
		err := cs.CoreV1().Pods(args.PodNamespace).Bind(r.Context(), &v1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: args.PodNamespace, Name: args.PodName, UID: args.PodUID},
			Target:     v1.ObjectReference{Kind: "Node", Name: args.Node},
		}, metav1.CreateOptions{})
		res := extenderv1.ExtenderBindingResult{}
		if err != nil {
			res.Error = err.Error()
		} else {
			e.mu.Lock()
			e.bound[args.PodUID] = args.Node
			e.mu.Unlock()
		}
		reply = res
	default:
		http.NotFound(w, r)
		return
	}
	Expect(json.NewEncoder(w).Encode(reply)).To(Succeed())
}

var _ = Describe("Extenders", func() {
	var ns string

	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		DeferCleanup(func(ctx SpecContext) { cleanUp(ctx, ns) })
		for _, n := range []string{"ext-a", "ext-b", "ext-c"} {
			newNode(ctx, n, "4")
		}
	})

	publishWithExtenders := func(ctx SpecContext, name string, exts ...configv1.Extender) {
		p := profile(name)
		fwk, err := profilebuild.Builder(sched)(ctx, p, runtime.WithExtenders(exts))
		Expect(err).NotTo(HaveOccurred())
		sched.Profiles().Publish(name, fwk)
	}

	It("place pods where the extenders say, and a changed extender takes effect without restart", func(ctx SpecContext) {
		ext := newExtenderServer("ext-b")
		publishWithExtenders(ctx, "extended", configv1.Extender{URLPrefix: ext.URL, FilterVerb: "filter"})
		for i := range 3 {
			newPod(ctx, podSpec(ns, fmt.Sprint("filtered-", i), "extended", "100m"))
		}
		for i := range 3 {
			Eventually(getPod(ctx, ns, fmt.Sprint("filtered-", i))).Should(WithTransform(nodeName, Equal("ext-b")))
		}

		// Filter keeps a and c, prioritize picks c: a change of the
		// profile's extenders is a new instance, live at once.
		ext.set([]string{"ext-a", "ext-c"}, "ext-c")
		publishWithExtenders(ctx, "extended",
			configv1.Extender{URLPrefix: ext.URL, FilterVerb: "filter"},
			configv1.Extender{URLPrefix: ext.URL, PrioritizeVerb: "prioritize", Weight: 100, NodeCacheCapable: true})
		for i := range 3 {
			newPod(ctx, podSpec(ns, fmt.Sprint("prioritized-", i), "extended", "100m"))
		}
		for i := range 3 {
			Eventually(getPod(ctx, ns, fmt.Sprint("prioritized-", i))).Should(WithTransform(nodeName, Equal("ext-c")))
		}
	})

	It("reports nodes the extender refused in the unschedulable message", func(ctx SpecContext) {
		ext := newExtenderServer()
		publishWithExtenders(ctx, "refused", configv1.Extender{URLPrefix: ext.URL, FilterVerb: "filter"})
		newPod(ctx, podSpec(ns, "nowhere", "refused", "100m"))
		Eventually(getPod(ctx, ns, "nowhere")).Should(WithTransform(podScheduledCondition, And(
			Not(BeNil()),
			HaveField("Reason", v1.PodReasonUnschedulable),
			HaveField("Message", "0/3 nodes are available: 3 node(s) refused by the test extender. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."),
		)))

		// Extenders register no events: any cluster event requeues the pod.
		ext.set([]string{"ext-a"}, "")
		newNode(ctx, "ext-d", "4")
		Eventually(getPod(ctx, ns, "nowhere")).Should(WithTransform(nodeName, Equal("ext-a")))
	})

	It("delegate binding to the binding extender interested in the pod", func(ctx SpecContext) {
		ext := newExtenderServer("ext-a")
		publishWithExtenders(ctx, "bound-by-extender", configv1.Extender{URLPrefix: ext.URL, FilterVerb: "filter", BindVerb: "bind"})
		pod := newPod(ctx, podSpec(ns, "delegated", "bound-by-extender", "100m"))
		Eventually(getPod(ctx, ns, "delegated")).Should(WithTransform(nodeName, Equal("ext-a")))
		// The binding is visible before the extender's reply is sent.
		Eventually(func() string { return ext.boundTo(pod.UID) }).Should(Equal("ext-a"))
		Expect(binds.get(pod.UID)).To(BeZero(), "the Bind plugins must not run when an extender bound the pod")
	})

	It("skip an ignorable extender that cannot be reached, and fail on one that is not ignorable", func(ctx SpecContext) {
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		publishWithExtenders(ctx, "ignorable", configv1.Extender{URLPrefix: down.URL, FilterVerb: "filter", Ignorable: true, HTTPTimeout: metav1.Duration{Duration: time.Second}})
		newPod(ctx, podSpec(ns, "placed", "ignorable", "100m"))
		Eventually(getPod(ctx, ns, "placed")).Should(WithTransform(nodeName, Not(BeEmpty())))

		publishWithExtenders(ctx, "required", configv1.Extender{URLPrefix: down.URL, FilterVerb: "filter", HTTPTimeout: metav1.Duration{Duration: time.Second}})
		newPod(ctx, podSpec(ns, "stuck", "required", "100m"))
		Eventually(getPod(ctx, ns, "stuck")).Should(WithTransform(podScheduledCondition, And(
			Not(BeNil()),
			HaveField("Reason", v1.PodReasonSchedulerError),
			HaveField("Message", ContainSubstring(down.URL+"/filter")),
		)))
	})

	It("put a transport error into the pod's condition clipped", func(ctx SpecContext) {
		// Go quotes a malformed status line whole in its error: 5 MiB
		// here, more than the API server takes in a status update.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(ln.Close)
		reply := []byte("HTTP/1.1 200" + strings.Repeat("x", 5<<20) + "\r\n\r\n")
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer func() { _ = conn.Close() }()
					_, _ = http.ReadRequest(bufio.NewReader(conn))
					_, _ = conn.Write(reply)
				}()
			}
		}()
		url := "http://" + ln.Addr().String()
		publishWithExtenders(ctx, "garbled", configv1.Extender{URLPrefix: url, FilterVerb: "filter", HTTPTimeout: metav1.Duration{Duration: time.Second}})
		newPod(ctx, podSpec(ns, "garbled", "garbled", "100m"))
		Eventually(getPod(ctx, ns, "garbled")).Should(WithTransform(podScheduledCondition, And(
			Not(BeNil()),
			HaveField("Reason", v1.PodReasonSchedulerError),
			HaveField("Message", And(ContainSubstring(url+"/filter"), WithTransform(func(s string) int { return len(s) }, BeNumerically("<=", 2<<10)))),
		)))
	})

	It("bound each call by httpTimeout", func(ctx SpecContext) {
		release := make(chan struct{})
		slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
		DeferCleanup(slow.Close)
		DeferCleanup(func() { close(release) })
		publishWithExtenders(ctx, "slow", configv1.Extender{URLPrefix: slow.URL, FilterVerb: "filter", HTTPTimeout: metav1.Duration{Duration: 300 * time.Millisecond}})
		newPod(ctx, podSpec(ns, "timed-out", "slow", "100m"))
		Eventually(getPod(ctx, ns, "timed-out")).WithTimeout(10 * time.Second).Should(WithTransform(podScheduledCondition, And(
			Not(BeNil()),
			HaveField("Message", ContainSubstring("Client.Timeout exceeded")),
		)))
		// Other profiles keep scheduling meanwhile.
		ext := newExtenderServer("ext-c")
		publishWithExtenders(ctx, "fast", configv1.Extender{URLPrefix: ext.URL, FilterVerb: "filter"})
		newPod(ctx, podSpec(ns, "quick", "fast", "100m"))
		Eventually(getPod(ctx, ns, "quick")).WithTimeout(5 * time.Second).Should(WithTransform(nodeName, Equal("ext-c")))
	})
})

var _ = Describe("A SchedulingProfile with extenders", func() {
	var (
		ns, operatorNS string
		c              client.Client
		r              *controllers.SchedulingProfileReconciler
		recorder       *events.FakeRecorder
	)

	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		operatorNS = newNamespace(ctx)
		DeferCleanup(func(ctx SpecContext) { cleanUp(ctx, ns) })
		for _, n := range []string{"ext-a", "ext-b", "ext-c"} {
			newNode(ctx, n, "4")
		}
		scheme := k8sruntime.NewScheme()
		Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
		Expect(schedulingv1alpha1.AddToScheme(scheme)).To(Succeed())
		var err error
		c, err = client.New(env.Config, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		planner := profilebuild.NewPlanner(profilebuild.Options{DefaultPlugins: plugins.DefaultPlugins(), ExtenderPolicy: sched.ExtenderPolicy(), Namespace: operatorNS})
		recorder = events.NewFakeRecorder(100)
		r = controllers.NewSchedulingProfileReconciler(c, sched.Profiles(), profilebuild.Builder(sched), recorder, planner, controllers.WithRevisionNamespace(operatorNS))
	})

	reconcile := func(ctx context.Context, name string) *schedulingv1alpha1.SchedulingProfile {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
		Expect(err).NotTo(HaveOccurred())
		sp := &schedulingv1alpha1.SchedulingProfile{}
		Expect(c.Get(ctx, types.NamespacedName{Name: name}, sp)).To(Succeed())
		return sp
	}
	condition := func(sp *schedulingv1alpha1.SchedulingProfile, t string) *metav1.Condition {
		return meta.FindStatusCondition(sp.Status.Conditions, t)
	}
	// create makes a profile with exts and reconciles it; the profile goes
	// when the spec ends.
	create := func(ctx SpecContext, name string, exts ...schedulingv1alpha1.Extender) *schedulingv1alpha1.SchedulingProfile {
		sp := &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: schedulingv1alpha1.SchedulingProfileSpec{Extenders: exts}}
		Expect(c.Create(ctx, sp)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(c.Delete(ctx, sp))).To(Succeed())
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: sp.Name}})
			Expect(err).NotTo(HaveOccurred())
		})
		return reconcile(ctx, name)
	}
	// update changes the profile's spec and reconciles it.
	update := func(ctx SpecContext, name string, change func(*schedulingv1alpha1.SchedulingProfileSpec)) *schedulingv1alpha1.SchedulingProfile {
		sp := &schedulingv1alpha1.SchedulingProfile{}
		Expect(c.Get(ctx, types.NamespacedName{Name: name}, sp)).To(Succeed())
		change(&sp.Spec)
		Expect(c.Update(ctx, sp)).To(Succeed())
		return reconcile(ctx, name)
	}

	It("calls them over TLS with a CA from a Secret, follows changes live and reports an unreachable one", func(ctx SpecContext) {
		// One TLS extender: the verb says which node it keeps.
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			var args extenderv1.ExtenderArgs
			if err := json.NewDecoder(req.Body).Decode(&args); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			keep := strings.TrimPrefix(req.URL.Path, "/keep-")
			res := extenderv1.ExtenderFilterResult{NodeNames: &[]string{}, FailedNodes: extenderv1.FailedNodesMap{}}
			for _, n := range *args.NodeNames {
				if n == keep {
					*res.NodeNames = append(*res.NodeNames, n)
				} else {
					res.FailedNodes[n] = "refused"
				}
			}
			_ = json.NewEncoder(w).Encode(res)
		}))
		DeferCleanup(srv.Close)
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		Expect(c.Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "extender-ca",
			Labels: map[string]string{schedulingv1alpha1.ExtenderTLSLabel: "tls-extended"}}, Data: map[string][]byte{"ca.crt": ca}})).To(Succeed())

		// Upstream's extender block, as it would be pasted, plus the CA reference.
		sp := &schedulingv1alpha1.SchedulingProfile{}
		Expect(json.Unmarshal([]byte(fmt.Sprintf(`{
			"apiVersion": "scheduling.schedprofiles.io/v1alpha1", "kind": "SchedulingProfile",
			"metadata": {"name": "tls-extended"},
			"spec": {"extenders": [{
				"urlPrefix": %q, "filterVerb": "keep-ext-b", "enableHTTPS": true, "nodeCacheCapable": true, "httpTimeout": "2s",
				"tlsConfig": {"serverName": "example.com", "caSecretRef": {"name": "extender-ca"}}
			}]}}`, srv.URL)), sp)).To(Succeed())
		Expect(c.Create(ctx, sp)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(c.Delete(ctx, sp))).To(Succeed())
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: sp.Name}})
			Expect(err).NotTo(HaveOccurred())
		})
		got := reconcile(ctx, sp.Name)
		Expect(condition(got, schedulingv1alpha1.ProfileAccepted)).To(HaveField("Status", metav1.ConditionTrue))
		Expect(condition(got, schedulingv1alpha1.ProfileExtendersReachable)).To(HaveField("Status", metav1.ConditionTrue))
		newPod(ctx, podSpec(ns, "first", "tls-extended", "100m"))
		Eventually(getPod(ctx, ns, "first")).Should(WithTransform(nodeName, Equal("ext-b")))

		// A changed extender serves the next pod, without restart.
		got.Spec.Extenders[0].FilterVerb = "keep-ext-c"
		Expect(c.Update(ctx, got)).To(Succeed())
		reconcile(ctx, sp.Name)
		newPod(ctx, podSpec(ns, "second", "tls-extended", "100m"))
		Eventually(getPod(ctx, ns, "second")).Should(WithTransform(nodeName, Equal("ext-c")))

		// An extender that cannot be reached shows in the profile's status.
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		got = reconcile(ctx, sp.Name)
		got.Spec.Extenders[0].URLPrefix = down.URL
		got.Spec.Extenders[0].EnableHTTPS = false
		got.Spec.Extenders[0].TLSConfig = nil
		Expect(c.Update(ctx, got)).To(Succeed())
		reconcile(ctx, sp.Name)
		newPod(ctx, podSpec(ns, "third", "tls-extended", "100m"))
		Eventually(func() *metav1.Condition {
			return condition(reconcile(ctx, sp.Name), schedulingv1alpha1.ProfileExtendersReachable)
		}).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", schedulingv1alpha1.ReasonExtenderUnreachable),
			HaveField("Message", ContainSubstring(down.URL+"/keep-ext-c")),
		))
	})

	It("refuses inline key material with the reason in status", func(ctx SpecContext) {
		sp := &schedulingv1alpha1.SchedulingProfile{
			ObjectMeta: metav1.ObjectMeta{Name: "inline-key"},
			Spec: schedulingv1alpha1.SchedulingProfileSpec{Extenders: []schedulingv1alpha1.Extender{{
				URLPrefix: "https://extender.example", FilterVerb: "filter", EnableHTTPS: true,
				TLSConfig: &schedulingv1alpha1.ExtenderTLSConfig{CertData: []byte("cert"), KeyData: []byte("key")},
			}}},
		}
		Expect(c.Create(ctx, sp)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(c.Delete(ctx, sp)).To(Succeed()) })
		got := reconcile(ctx, sp.Name)
		Expect(condition(got, schedulingv1alpha1.ProfileAccepted)).To(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", schedulingv1alpha1.ReasonInvalidSpec),
			HaveField("Message", HavePrefix("Generation 1 cannot be built: extenders[0].tlsConfig.certData: not supported in a SchedulingProfile")),
		))
	})

	Describe("whose preempt reply reaches beyond the candidates it was sent", func() {
		var (
			critical *v1.Pod
			victims  map[string]*v1.Pod
			ext      *preemptExtender
			high     string
		)

		// ext-a and ext-b are full of pods a priority-10 preemptor may
		// preempt; ext-c is full with a system-critical pod of kube-system,
		// which no preemptor of this profile may touch.
		BeforeEach(func(ctx SpecContext) {
			var low string
			low, high = newPriorityClass(ctx, "ext-low-"+ns, 1), newPriorityClass(ctx, "ext-high-"+ns, 10)
			victims = map[string]*v1.Pod{}
			for _, n := range []string{"ext-a", "ext-b"} {
				p := podSpec(ns, "victim-"+n, "unused", "4")
				p.Spec.NodeName, p.Spec.PriorityClassName = n, low
				victims[n] = newPod(ctx, p)
			}
			critical = podSpec(metav1.NamespaceSystem, "coredns-"+ns, "unused", "4")
			critical.Spec.NodeName, critical.Spec.PriorityClassName = "ext-c", "system-cluster-critical"
			critical = newPod(ctx, critical)
			DeferCleanup(func(ctx SpecContext) {
				zero := int64(0)
				Expect(cs.CoreV1().Pods(critical.Namespace).Delete(ctx, critical.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})).To(Succeed())
			})

			ext = newPreemptExtender()
			create(ctx, "preempt-extended", schedulingv1alpha1.Extender{URLPrefix: ext.URL, PreemptVerb: "preempt", NodeCacheCapable: true})
		})

		// preempt has the extender answer with reply, then creates a
		// preemptor of the profile.
		preempt := func(ctx SpecContext, name string, reply func(map[string]*extenderv1.MetaVictims) map[string]*extenderv1.MetaVictims) {
			ext.set(reply)
			preemptor := podSpec(ns, name, "preempt-extended", "2")
			preemptor.Spec.PriorityClassName = high
			newPod(ctx, preemptor)
		}

		// refused waits until the profile and the preemptor say the reply
		// was refused for why, and checks that no pod was deleted.
		refused := func(ctx SpecContext, why string) {
			Eventually(func() *metav1.Condition {
				return condition(reconcile(ctx, "preempt-extended"), schedulingv1alpha1.ProfileExtendersReachable)
			}).Should(And(
				HaveField("Status", metav1.ConditionFalse),
				HaveField("Reason", schedulingv1alpha1.ReasonExtenderReplyRefused),
				HaveField("Message", ContainSubstring(ext.URL+"/preempt: "+why)),
			))
			Eventually(recorder.Events).Should(Receive(And(HavePrefix("Warning ExtenderReplyRefused "), ContainSubstring(why))))
			// As upstream, a failed preemption leaves the pod
			// unschedulable, with the failure in the message.
			Eventually(getPod(ctx, ns, "preemptor")).Should(WithTransform(podScheduledCondition, And(
				Not(BeNil()),
				HaveField("Reason", v1.PodReasonUnschedulable),
				HaveField("Message", ContainSubstring(why)),
			)))
			for _, p := range append([]*v1.Pod{critical}, victims["ext-a"], victims["ext-b"]) {
				Expect(getPod(ctx, p.Namespace, p.Name)()).To(HaveField("DeletionTimestamp", BeNil()), "pod %s/%s", p.Namespace, p.Name)
			}
		}

		It("refuses a node that was not a candidate, and then lets the extender choose among the candidates, as upstream", func(ctx SpecContext) {
			preempt(ctx, "preemptor", func(map[string]*extenderv1.MetaVictims) map[string]*extenderv1.MetaVictims {
				return map[string]*extenderv1.MetaVictims{"ext-c": {Pods: []*extenderv1.MetaPod{{UID: string(critical.UID)}}}}
			})
			refused(ctx, `it names node "ext-c", which was not a candidate`)

			// The refused pod waits for a cluster event, as upstream; a
			// new preemptor is tried at once.
			zero := int64(0)
			Expect(cs.CoreV1().Pods(ns).Delete(ctx, "preemptor", metav1.DeleteOptions{GracePeriodSeconds: &zero})).To(Succeed())
			preempt(ctx, "second-preemptor", func(sent map[string]*extenderv1.MetaVictims) map[string]*extenderv1.MetaVictims {
				return map[string]*extenderv1.MetaVictims{"ext-b": sent["ext-b"]}
			})
			Eventually(getPod(ctx, ns, "second-preemptor")).Should(HaveField("Status.NominatedNodeName", "ext-b"))
			Eventually(func() (*v1.Pod, error) {
				p, err := getPod(ctx, ns, "victim-ext-b")()
				if apierrors.IsNotFound(err) {
					return &v1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{}}}, nil
				}
				return p, err
			}).Should(HaveField("DeletionTimestamp", Not(BeNil())))
			Expect(getPod(ctx, ns, "victim-ext-a")()).To(HaveField("DeletionTimestamp", BeNil()))
			Expect(getPod(ctx, critical.Namespace, critical.Name)()).To(HaveField("DeletionTimestamp", BeNil()))
			Eventually(func() *metav1.Condition {
				return condition(reconcile(ctx, "preempt-extended"), schedulingv1alpha1.ProfileExtendersReachable)
			}).Should(HaveField("Status", metav1.ConditionTrue))
		})

		It("refuses a pod that was not proposed as a victim on a candidate node", func(ctx SpecContext) {
			preempt(ctx, "preemptor", func(map[string]*extenderv1.MetaVictims) map[string]*extenderv1.MetaVictims {
				return map[string]*extenderv1.MetaVictims{"ext-a": {Pods: []*extenderv1.MetaPod{{UID: string(critical.UID)}}}}
			})
			refused(ctx, fmt.Sprintf(`it names pod UID %q on node "ext-a", which was not proposed as a victim there`, critical.UID))
		})
	})

	It("refuses a reply larger than allowed without reading it whole", func(ctx SpecContext) {
		const huge = 128 << 20
		chunk := []byte(strings.Repeat("x", 64<<10))
		flood := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"error":"`))
			for range huge / len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			_, _ = w.Write([]byte(`"}`))
		}))
		DeferCleanup(flood.Close)
		create(ctx, "flooded", schedulingv1alpha1.Extender{URLPrefix: flood.URL, FilterVerb: "filter", NodeCacheCapable: true})

		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		newPod(ctx, podSpec(ns, "flooded", "flooded", "100m"))
		Eventually(getPod(ctx, ns, "flooded")).Should(WithTransform(podScheduledCondition, And(
			Not(BeNil()),
			HaveField("Reason", v1.PodReasonSchedulerError),
			HaveField("Message", MatchRegexp(`/filter: it is larger than \d+ bytes, the request's \d+ and the %d more the operator allows$`, extender.DefaultMaxReplyBytes)),
		)))
		goruntime.ReadMemStats(&after)
		// Read whole, the reply and the error made of it would take over
		// 256 MiB.
		Expect(after.TotalAlloc - before.TotalAlloc).To(BeNumerically("<", 64<<20))
		Eventually(func() *metav1.Condition {
			return condition(reconcile(ctx, "flooded"), schedulingv1alpha1.ProfileExtendersReachable)
		}).Should(And(
			HaveField("Reason", schedulingv1alpha1.ReasonExtenderReplyRefused),
			HaveField("Message", ContainSubstring("it is larger than")),
		))
	})

	It("refuses an httpTimeout that could stall the loop, and a URL the operator does not allow, while the last valid generation serves", func(ctx SpecContext) {
		ext := newExtenderServer("ext-b")
		sp := create(ctx, "guarded", schedulingv1alpha1.Extender{URLPrefix: ext.URL, FilterVerb: "filter"})
		Expect(condition(sp, schedulingv1alpha1.ProfileAccepted)).To(HaveField("Status", metav1.ConditionTrue))

		sp = update(ctx, "guarded", func(spec *schedulingv1alpha1.SchedulingProfileSpec) {
			spec.Extenders[0].HTTPTimeout = metav1.Duration{Duration: 5 * time.Minute}
		})
		Expect(condition(sp, schedulingv1alpha1.ProfileAccepted)).To(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", schedulingv1alpha1.ReasonInvalidSpec),
			HaveField("Message", `Generation 2 cannot be built: Extenders: extenders[0].httpTimeout: Invalid value: "5m0s": must be at most 10s: the scheduling loop waits for filter and preempt calls, and a longer wait would hold up every profile`),
		))

		sp = update(ctx, "guarded", func(spec *schedulingv1alpha1.SchedulingProfileSpec) {
			spec.Extenders[0].HTTPTimeout = metav1.Duration{}
			spec.Extenders[0].URLPrefix = "http://gpu-extender.kube-system.svc:8888/scheduler"
		})
		Expect(condition(sp, schedulingv1alpha1.ProfileAccepted)).To(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Reason", schedulingv1alpha1.ReasonInvalidSpec),
			HaveField("Message", ContainSubstring("extenders[0].urlPrefix: Forbidden: http://gpu-extender.kube-system.svc:8888/scheduler is not under a URL prefix the operator allows (--allowed-extender-url-prefixes=http://127.0.0.1:*,")),
		))
		Expect(condition(sp, schedulingv1alpha1.ProfileActive)).To(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", "Generation 1, the last valid one, keeps serving schedulerName guarded"),
		))
		newPod(ctx, podSpec(ns, "guarded", "guarded", "100m"))
		Eventually(getPod(ctx, ns, "guarded")).Should(WithTransform(nodeName, Equal("ext-b")))
	})

	It("says the same of an unlabelled Secret, one labelled for another profile, one without the key and a missing one", func(ctx SpecContext) {
		ca := "-----BEGIN CERTIFICATE-----\n"
		sp := create(ctx, "tls-probe", schedulingv1alpha1.Extender{URLPrefix: "https://127.0.0.1:1", FilterVerb: "filter", EnableHTTPS: true,
			TLSConfig: &schedulingv1alpha1.ExtenderTLSConfig{CASecretRef: &schedulingv1alpha1.SecretKeyReference{Name: "probed"}}})
		refusal := func(sp *schedulingv1alpha1.SchedulingProfile) string {
			cond := condition(sp, schedulingv1alpha1.ProfileAccepted)
			Expect(cond).To(HaveField("Status", metav1.ConditionFalse))
			_, msg, found := strings.Cut(cond.Message, "cannot be built: ")
			Expect(found).To(BeTrue(), cond.Message)
			return msg
		}
		missing := refusal(sp)
		Expect(missing).To(Equal(fmt.Sprintf("extenders[0].tlsConfig.caSecretRef: no Secret probed in namespace %s is labelled %s=tls-probe and holds ca.crt; create Secret %s/probed with that label and key ca.crt, and the profile is built again", operatorNS, schedulingv1alpha1.ExtenderTLSLabel, operatorNS)))

		secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "probed"}, Data: map[string][]byte{"ca.crt": []byte(ca)}}
		Expect(c.Create(ctx, secret)).To(Succeed())
		for _, change := range []func(*v1.Secret){
			func(*v1.Secret) {}, // unlabelled
			func(s *v1.Secret) {
				s.Labels = map[string]string{schedulingv1alpha1.ExtenderTLSLabel: "another-profile"}
			},
			func(s *v1.Secret) {
				s.Labels = map[string]string{schedulingv1alpha1.ExtenderTLSLabel: "tls-probe"}
				s.Data = map[string][]byte{"tls.crt": []byte(ca)}
			},
		} {
			Expect(c.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
			change(secret)
			Expect(c.Update(ctx, secret)).To(Succeed())
			// A spec change has the profile read its Secrets again.
			sp = update(ctx, "tls-probe", func(spec *schedulingv1alpha1.SchedulingProfileSpec) { spec.Extenders[0].FilterVerb += "x" })
			Expect(refusal(sp)).To(Equal(missing))
		}
	})
})

// preemptExtender answers preempt calls with what its reply function
// makes of the candidates it was sent.
type preemptExtender struct {
	*httptest.Server
	mu    sync.Mutex
	reply func(sent map[string]*extenderv1.MetaVictims) map[string]*extenderv1.MetaVictims
}

func newPreemptExtender() *preemptExtender {
	e := &preemptExtender{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer GinkgoRecover()
		var args extenderv1.ExtenderPreemptionArgs
		Expect(json.NewDecoder(r.Body).Decode(&args)).To(Succeed())
		e.mu.Lock()
		reply := e.reply
		e.mu.Unlock()
		res := extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: args.NodeNameToMetaVictims}
		if reply != nil {
			res.NodeNameToMetaVictims = reply(args.NodeNameToMetaVictims)
		}
		Expect(json.NewEncoder(w).Encode(res)).To(Succeed())
	}))
	DeferCleanup(e.Close)
	return e
}

func (e *preemptExtender) set(reply func(map[string]*extenderv1.MetaVictims) map[string]*extenderv1.MetaVictims) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reply = reply
}

// newPriorityClass creates a PriorityClass that goes when the spec ends.
func newPriorityClass(ctx context.Context, name string, value int32) string {
	pc, err := cs.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(cs.SchedulingV1().PriorityClasses().Delete(ctx, pc.Name, metav1.DeleteOptions{})).To(Succeed())
	})
	// The API server's Priority admission plugin resolves a pod's class
	// from its own informer, so a pod created right after the class can be
	// refused with "no PriorityClass with name ... was found". Wait until a
	// dry-run pod naming the class is admitted.
	probe := podSpec("default", "priority-probe", "unused", "1")
	probe.Spec.PriorityClassName = pc.Name
	Eventually(func() error {
		_, err := cs.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}).Should(Succeed())
	return pc.Name
}
