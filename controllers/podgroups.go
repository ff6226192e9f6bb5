package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	podgroupv1alpha1 "github.com/schedprofiles/profile-scheduler/api/podgroup/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/coscheduling"
)

// PodGroups reads PodGroups for the Coscheduling plugin from the operator's
// cache: the scheduling cycle makes no API call for them.
type PodGroups struct {
	Reader client.Reader
}

var _ coscheduling.PodGroups = PodGroups{}

// Get returns the PodGroup namespace/name, or nil when there is none.
func (g PodGroups) Get(ctx context.Context, namespace, name string) (*podgroupv1alpha1.PodGroup, error) {
	pg := &podgroupv1alpha1.PodGroup{}
	if err := g.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, pg); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, nil
		}
		return nil, err
	}
	return pg, nil
}
