package testing

import (
	"fmt"
	gotesting "testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// WithPluginArgs sets the args of plugin name in profile and returns it; nil
// args leave the plugin's defaults, as a profile without pluginConfig does.
func WithPluginArgs[T any, PT interface {
	*T
	k8sruntime.Object
}](profile *configv1.KubeSchedulerProfile, name string, args PT) *configv1.KubeSchedulerProfile {
	if args != nil {
		profile.PluginConfig = append(profile.PluginConfig, configv1.PluginConfig{Name: name, Args: k8sruntime.RawExtension{Object: args}})
	}
	return profile
}

// Informers returns the options giving a framework instance a fake client
// and an (unstarted) informer factory whose listers already hold objs, so a
// plugin reads them as it would from a synced cache. An object of a kind no
// plugin lists fails the test.
func Informers(tb gotesting.TB, objs ...k8sruntime.Object) []runtime.Option {
	tb.Helper()
	cs, factory := InformerFactory(tb, objs...)
	return []runtime.Option{runtime.WithClientSet(cs), runtime.WithInformerFactory(factory)}
}

// InformerFactory returns a fake client holding objs, for the writes and
// reads a plugin makes through the API, and an (unstarted) informer factory
// over it whose stores already hold objs, as a synced cache would. An
// object of a kind no plugin lists fails the test.
func InformerFactory(tb gotesting.TB, objs ...k8sruntime.Object) (*fake.Clientset, informers.SharedInformerFactory) {
	tb.Helper()
	cs := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(cs, 0)
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.Node:
			err = factory.Core().V1().Nodes().Informer().GetStore().Add(o)
		case *v1.Pod:
			err = factory.Core().V1().Pods().Informer().GetStore().Add(o)
		case *v1.Namespace:
			err = factory.Core().V1().Namespaces().Informer().GetStore().Add(o)
		case *v1.Service:
			err = factory.Core().V1().Services().Informer().GetStore().Add(o)
		case *v1.ReplicationController:
			err = factory.Core().V1().ReplicationControllers().Informer().GetStore().Add(o)
		case *v1.PersistentVolume:
			err = factory.Core().V1().PersistentVolumes().Informer().GetStore().Add(o)
		case *v1.PersistentVolumeClaim:
			err = factory.Core().V1().PersistentVolumeClaims().Informer().GetStore().Add(o)
		case *appsv1.ReplicaSet:
			err = factory.Apps().V1().ReplicaSets().Informer().GetStore().Add(o)
		case *appsv1.StatefulSet:
			err = factory.Apps().V1().StatefulSets().Informer().GetStore().Add(o)
		case *policyv1.PodDisruptionBudget:
			err = factory.Policy().V1().PodDisruptionBudgets().Informer().GetStore().Add(o)
		case *storagev1.StorageClass:
			err = factory.Storage().V1().StorageClasses().Informer().GetStore().Add(o)
		case *storagev1.CSINode:
			err = factory.Storage().V1().CSINodes().Informer().GetStore().Add(o)
		case *storagev1.CSIDriver:
			err = factory.Storage().V1().CSIDrivers().Informer().GetStore().Add(o)
		case *storagev1.CSIStorageCapacity:
			err = factory.Storage().V1().CSIStorageCapacities().Informer().GetStore().Add(o)
		case *storagev1.VolumeAttachment:
			err = factory.Storage().V1().VolumeAttachments().Informer().GetStore().Add(o)
		default:
			err = fmt.Errorf("unexpected object %T", o)
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	return cs, factory
}
