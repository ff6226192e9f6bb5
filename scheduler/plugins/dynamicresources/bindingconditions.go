package dynamicresources

import (
	"fmt"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"github.com/schedprofiles/profile-scheduler/scheduler/metrics"
)

// bindingConditionsStatus is the state of the binding conditions of one
// allocated device, for logs and the binding-conditions metrics.
type bindingConditionsStatus struct {
	Driver string
	Pool   string
	Device string
	// Pending are the binding conditions not true yet (all of them while
	// the device has no status).
	Pending []string
	// Failed are the binding failure conditions that are true.
	Failed []string
}

// listBindingConditionsStatus returns the state of each allocated device
// of claim that has binding conditions.
func listBindingConditionsStatus(claim *resourceapi.ResourceClaim) []bindingConditionsStatus {
	if claim == nil || claim.Status.Allocation == nil {
		return nil
	}
	var out []bindingConditionsStatus
	for _, res := range claim.Status.Allocation.Devices.Results {
		if len(res.BindingConditions) == 0 {
			continue
		}
		sum := bindingConditionsStatus{Driver: res.Driver, Pool: res.Pool, Device: res.Device}
		ds := getAllocatedDeviceStatus(claim, &res)
		if ds == nil {
			sum.Pending = append(sum.Pending, res.BindingConditions...)
			out = append(out, sum)
			continue
		}
		for _, c := range res.BindingFailureConditions {
			if apimeta.IsStatusConditionTrue(ds.Conditions, c) {
				sum.Failed = append(sum.Failed, c)
			}
		}
		for _, c := range res.BindingConditions {
			if !apimeta.IsStatusConditionTrue(ds.Conditions, c) {
				sum.Pending = append(sum.Pending, c)
			}
		}
		out = append(out, sum)
	}
	return out
}

// bindingConditionsStatusFor selects, across the pod's claims, the
// devices that explain an outcome (a metrics.BindingConditionsStatus*
// value): all ready ones for success, the failed ones for failure, the
// pending ones otherwise.
func bindingConditionsStatusFor(state *stateData, outcome string) []bindingConditionsStatus {
	var out []bindingConditionsStatus
	for _, claim := range state.claims.all() {
		for _, s := range listBindingConditionsStatus(claim) {
			switch outcome {
			case metrics.BindingConditionsStatusSuccess:
				if len(s.Failed) == 0 && len(s.Pending) == 0 {
					out = append(out, s)
				}
			case metrics.BindingConditionsStatusFailed:
				if len(s.Failed) > 0 {
					out = append(out, bindingConditionsStatus{Driver: s.Driver, Pool: s.Pool, Device: s.Device, Failed: s.Failed})
				}
			default:
				if len(s.Pending) > 0 && len(s.Failed) == 0 {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// formatBindingConditionsStatus formats devices on one line, as upstream
// logs them.
func formatBindingConditionsStatus(devices []bindingConditionsStatus) string {
	parts := make([]string, 0, len(devices))
	for _, d := range devices {
		base := fmt.Sprintf("<driver=%s, pool=%s> %s", d.Driver, d.Pool, d.Device)
		if len(d.Failed) > 0 {
			base += fmt.Sprintf(" failed=[%s]", strings.Join(d.Failed, ","))
		}
		if len(d.Pending) > 0 {
			base += fmt.Sprintf(" pending=[%s]", strings.Join(d.Pending, ","))
		}
		parts = append(parts, base)
	}
	return strings.Join(parts, "; ")
}

// bindingConditionsFormatter formats the devices of an outcome only when
// a log line is written.
type bindingConditionsFormatter struct {
	state   *stateData
	outcome string
}

func (f bindingConditionsFormatter) String() string {
	return formatBindingConditionsStatus(bindingConditionsStatusFor(f.state, f.outcome))
}

// recordBindingConditions observes, as upstream, the wait of PreBind that
// ended with outcome after waited: its duration once per allocated device
// of the pod's claims, and one allocation per device with binding
// conditions.
func (pl *dynamicResources) recordBindingConditions(state *stateData, outcome string, waited time.Duration) {
	m, profile := pl.fh.Metrics(), pl.fh.ProfileName()
	for _, claim := range state.claims.all() {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, res := range claim.Status.Allocation.Devices.Results {
			m.DRABindingConditionsWaitDuration.WithLabelValues(profile, res.Driver, outcome).Observe(waited.Seconds())
		}
		for _, s := range listBindingConditionsStatus(claim) {
			m.DRABindingConditionsAllocations.WithLabelValues(profile, s.Driver, outcome).Inc()
		}
	}
}
