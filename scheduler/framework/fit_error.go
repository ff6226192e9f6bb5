package framework

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Diagnosis collects why a scheduling attempt failed.
type Diagnosis struct {
	// NodeToStatus holds per-node rejections from PreFilter and Filter.
	NodeToStatus *NodeToStatus
	// UnschedulablePlugins rejected the pod with Unschedulable or UnschedulableAndUnresolvable.
	UnschedulablePlugins sets.Set[string]
	// PendingPlugins returned Pending.
	PendingPlugins sets.Set[string]
	// PreFilterMsg is the message of a PreFilter rejection.
	PreFilterMsg string
	// PostFilterMsg is the message of the PostFilter plugins.
	PostFilterMsg string
}

// AddPluginStatus records the plugin of a rejection or Pending status.
func (d *Diagnosis) AddPluginStatus(sts *Status) {
	if sts.Plugin() == "" {
		return
	}
	if sts.IsRejected() {
		if d.UnschedulablePlugins == nil {
			d.UnschedulablePlugins = sets.New[string]()
		}
		d.UnschedulablePlugins.Insert(sts.Plugin())
	}
	if sts.Code() == Pending {
		if d.PendingPlugins == nil {
			d.PendingPlugins = sets.New[string]()
		}
		d.PendingPlugins.Insert(sts.Plugin())
	}
}

// NoNodeAvailableMsg starts every fit error message.
const NoNodeAvailableMsg = "0/%v nodes are available"

// FitError is the error of a pod that fits no node.
type FitError struct {
	Pod         *v1.Pod
	NumAllNodes int
	Diagnosis   Diagnosis
}

// Error returns upstream's message, e.g.
// "0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint {k: v}."
func (f *FitError) Error() string {
	msg := fmt.Sprintf(NoNodeAvailableMsg+":", f.NumAllNodes)
	if pre := f.Diagnosis.PreFilterMsg; pre != "" {
		// Every node got the same PreFilter status; listing it per node would repeat it.
		msg += fmt.Sprintf(" %v.", pre)
	} else if f.Diagnosis.NodeToStatus != nil {
		reasons := make(map[string]int)
		f.Diagnosis.NodeToStatus.ForEachExplicitNode(func(_ string, s *Status) {
			for _, r := range s.Reasons() {
				reasons[r]++
			}
		})
		if n := f.Diagnosis.NodeToStatus.Len(); n < f.NumAllNodes {
			for _, r := range f.Diagnosis.NodeToStatus.AbsentNodesStatus().Reasons() {
				reasons[r] += f.NumAllNodes - n
			}
		}
		list := make([]string, 0, len(reasons))
		for r, c := range reasons {
			list = append(list, fmt.Sprintf("%v %v", c, r))
		}
		sort.Strings(list)
		if len(list) > 0 {
			msg += fmt.Sprintf(" %v.", strings.Join(list, ", "))
		}
	}
	if post := f.Diagnosis.PostFilterMsg; post != "" {
		msg += fmt.Sprintf(" %v", post)
	}
	return msg
}
