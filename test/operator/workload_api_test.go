package operator_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
	"github.com/schedprofiles/profile-scheduler/internal/operator"
	"github.com/schedprofiles/profile-scheduler/scheduler"
	"github.com/schedprofiles/profile-scheduler/scheduler/framework"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
	"github.com/schedprofiles/profile-scheduler/test/testenv"
)

// inertPlugin stands in for GangScheduling where the registry has none:
// what is under test is whether the profile is built, not what it does.
type inertPlugin struct{}

func (inertPlugin) Name() string { return "GangScheduling" }

// A workload-aware profile needs the cluster to serve upstream's workload
// API. This spec runs a control plane of its own whose kube-apiserver
// starts without it, and an operator with the workload gates.
var _ = Describe("a workload-aware profile and the workload API", func() {
	It("is not Ready while the API server does not serve scheduling.k8s.io/v1beta1, other profiles are, and it is built once the API server serves it", func(ctx SpecContext) {
		wenv, err := testenv.NewWithoutWorkloadAPI()
		Expect(err).NotTo(HaveOccurred())
		wcfg, err := wenv.Start()
		Expect(err).NotTo(HaveOccurred())
		var apiserver *testenv.ControlPlaneProcess
		DeferCleanup(func() error {
			var errs []error
			if apiserver != nil {
				errs = append(errs, apiserver.Stop())
			}
			return errors.Join(append(errs, wenv.Stop())...)
		})
		apiserver, err = testenv.FindControlPlaneProcessWith("kube-apiserver", filepath.Join(GinkgoT().TempDir(), "kube-apiserver.log"),
			"--secure-port="+wenv.ControlPlane.GetAPIServer().Port)
		Expect(err).NotTo(HaveOccurred())
		c, err := client.New(wcfg, client.Options{Scheme: wenv.Scheme})
		Expect(err).NotTo(HaveOccurred())

		registry := plugins.NewInTreeRegistry()
		if _, ok := registry["GangScheduling"]; !ok {
			Expect(registry.Register("GangScheduling", func(context.Context, k8sruntime.Object, framework.Handle) (framework.Plugin, error) {
				return inertPlugin{}, nil
			}, runtime.ArgsSpec{})).To(Succeed())
		}
		running, err := testenv.StartOperator(context.Background(), wcfg, testenv.OperatorOptions{
			Manager: ctrl.Options{Scheme: wenv.Scheme},
			Operator: operator.Options{
				Registry:               registry,
				ReservedSchedulerNames: []string{corev1.DefaultSchedulerName},
				Scheduler:              []scheduler.Option{scheduler.WithWorkloadGates(true, true)},
			},
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(running.Stop)

		gangs := &schedulingv1alpha1.SchedulingProfile{
			ObjectMeta: metav1.ObjectMeta{Name: "workload-gangs"},
			Spec: schedulingv1alpha1.SchedulingProfileSpec{Plugins: &schedulingv1alpha1.Plugins{
				MultiPoint: schedulingv1alpha1.PluginSet{Enabled: []schedulingv1alpha1.Plugin{{Name: "GangScheduling"}}},
			}},
		}
		plain := &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: "workload-plain"}}
		Expect(c.Create(ctx, gangs)).To(Succeed())
		Expect(c.Create(ctx, plain)).To(Succeed())

		ready := func(name string) func(Gomega) *metav1.Condition {
			return func(g Gomega) *metav1.Condition {
				sp := &schedulingv1alpha1.SchedulingProfile{}
				g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, sp)).To(Succeed())
				return meta.FindStatusCondition(sp.Status.Conditions, schedulingv1alpha1.ProfileReady)
			}
		}
		Eventually(ready(plain.Name)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonServing))
		Eventually(ready(gangs.Name)).Should(haveCondition(metav1.ConditionFalse, schedulingv1alpha1.ReasonWorkloadAPINotServed))
		cond := ready(gangs.Name)(Default)
		Expect(cond.Message).To(ContainSubstring("does not serve scheduling.k8s.io/v1beta1 workloads and podgroups"))
		Expect(cond.Message).To(ContainSubstring("--runtime-config=scheduling.k8s.io/v1beta1=true and --feature-gates=GenericWorkload=true"))
		Expect(running.Profiles.Get("workload-gangs")).To(BeNil())

		By("starting kube-apiserver again with the workload API")
		Expect(apiserver.Kill()).To(Succeed())
		for name, values := range localcluster.WorkloadAPIServerArgs() {
			for _, v := range values {
				apiserver.AddArgs(fmt.Sprintf("--%s=%s", name, v))
			}
		}
		Expect(apiserver.Start()).To(Succeed())
		Eventually(ready(gangs.Name)).WithTimeout(90 * time.Second).WithPolling(time.Second).
			Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonServing))
		Expect(running.Profiles.Get("workload-gangs")).NotTo(BeNil())
		Expect(running.Profiles.Get("workload-gangs").WorkloadAware()).To(BeTrue())
		Expect(running.Profiles.Get("workload-plain").WorkloadAware()).To(BeFalse())
		Eventually(ready(plain.Name)).Should(haveCondition(metav1.ConditionTrue, schedulingv1alpha1.ReasonServing))
	})
})
