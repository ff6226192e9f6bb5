package operator_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
)

var _ = Describe("The API server's version", func() {
	var (
		clientset *kubernetes.Clientset
		recorder  events.EventRecorder
	)
	BeforeEach(func() {
		var err error
		clientset, err = kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: clientset.EventsV1()})
		stop := make(chan struct{})
		broadcaster.StartRecordingToSink(stop)
		DeferCleanup(func() {
			close(stop)
			broadcaster.Shutdown()
		})
		recorder = broadcaster.NewRecorder(env.Scheme, operator.EventSource)
	})

	It("is read from the API server, which reports the version the control plane was built at", func() {
		ns := namespace()
		regarding := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: "operator"}
		info, err := operator.CheckAPIServerVersion(ctx, clientset.Discovery(), recorder, regarding, version.MustParseGeneric(operator.SchedulerVersion))
		Expect(err).NotTo(HaveOccurred())
		Expect(info.GitVersion).To(Equal("v" + localcluster.KubernetesVersion))
		built := version.MustParseGeneric(localcluster.KubernetesVersion)
		Expect([]string{info.Major, info.Minor}).To(Equal([]string{fmt.Sprint(built.Major()), fmt.Sprint(built.Minor())}))
		Consistently(eventNotes("Pod", ns, "operator", operator.ReasonUnsupportedAPIServerVersion), 2*time.Second).Should(BeEmpty(),
			"the control plane the tests run on is the one the operator supports")
	})

	It("is reported in an event when a kube-scheduler of the operator's version could not talk to it", func() {
		ns := namespace()
		regarding := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: "operator"}
		// A kube-scheduler two minor versions ahead of the test control
		// plane: newer than the API server.
		ahead := version.MustParseGeneric(localcluster.KubernetesVersion)
		ahead = version.MajorMinor(ahead.Major(), ahead.Minor()+2)
		_, err := operator.CheckAPIServerVersion(ctx, clientset.Discovery(), recorder, regarding, ahead)
		Expect(err).NotTo(HaveOccurred())
		Eventually(eventNotes("Pod", ns, "operator", operator.ReasonUnsupportedAPIServerVersion)).Should(ConsistOf(
			"kube-apiserver v" + localcluster.KubernetesVersion + " is older than kube-scheduler " + ahead.String() +
				", whose behaviour this operator follows and which must not be newer than the API server (supported: " +
				ahead.String() + " and " + version.MajorMinor(ahead.Major(), ahead.Minor()+1).String() + ")"))
	})

	It("is within the supported skew for the operator running on this control plane", func() {
		Consistently(eventNotes("Namespace", "", "default", operator.ReasonUnsupportedAPIServerVersion), 2*time.Second).Should(BeEmpty())
	})
})
