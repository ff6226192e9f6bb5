package dynamicresources

import (
	"fmt"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// isClaimReadyForBinding reports whether all binding conditions of the
// claim's allocated devices are true (including when there are none). It
// returns an error wrapping ErrDeviceBindingFailed when a binding failure
// condition is true.
func isClaimReadyForBinding(claim *resourceapi.ResourceClaim) (bool, error) {
	if claim.Status.Allocation == nil {
		return false, nil
	}
	for _, deviceRequest := range claim.Status.Allocation.Devices.Results {
		if len(deviceRequest.BindingConditions) == 0 {
			continue
		}
		deviceStatus := getAllocatedDeviceStatus(claim, &deviceRequest)
		if deviceStatus == nil {
			return false, nil
		}
		for _, cond := range deviceRequest.BindingFailureConditions {
			failedCond := apimeta.FindStatusCondition(deviceStatus.Conditions, cond)
			if failedCond != nil && failedCond.Status == metav1.ConditionTrue {
				return false, fmt.Errorf("%w: claim=%s, reason=%s, message=%q",
					ErrDeviceBindingFailed,
					claim.Name,
					failedCond.Reason,
					failedCond.Message)
			}
		}
		for _, cond := range deviceRequest.BindingConditions {
			if !apimeta.IsStatusConditionTrue(deviceStatus.Conditions, cond) {
				return false, nil
			}
		}
	}
	return true, nil
}

// isClaimTimeout reports whether the claim has devices with binding
// conditions and was allocated longer than the binding timeout ago.
func (pl *dynamicResources) isClaimTimeout(claim *resourceapi.ResourceClaim) bool {
	if claim.Status.Allocation == nil || claim.Status.Allocation.AllocationTimestamp == nil {
		return false
	}
	for _, deviceRequest := range claim.Status.Allocation.Devices.Results {
		if deviceRequest.BindingConditions == nil {
			continue
		}
		if claim.Status.Allocation.AllocationTimestamp.Add(pl.bindingTimeout).Before(time.Now()) {
			return true
		}
	}
	return false
}

// isPodReadyForBinding re-reads the pod's claims and reports whether all
// their binding conditions are true. It fails when a binding failure
// condition is true or a claim timed out.
func (pl *dynamicResources) isPodReadyForBinding(state *stateData) (bool, error) {
	for claimIndex, claim := range state.claims.all() {
		claim, err := pl.draManager.ResourceClaims().Get(claim.Namespace, claim.Name)
		if err != nil {
			return false, err
		}
		state.claims.set(claimIndex, claim)
		ready, err := isClaimReadyForBinding(claim)
		if err != nil {
			return false, err
		}
		if !ready {
			if pl.isClaimTimeout(claim) {
				return false, fmt.Errorf("%w: claim=%s", ErrDeviceBindingTimeout, claim.Name)
			}
			return false, nil
		}
	}
	return true, nil
}

// hasBindingConditions reports whether an allocated device of the pod's
// claims has binding conditions.
func hasBindingConditions(state *stateData) bool {
	for _, claim := range state.claims.all() {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, device := range claim.Status.Allocation.Devices.Results {
			if len(device.BindingConditions) > 0 {
				return true
			}
		}
	}
	return false
}

func getAllocatedDeviceStatus(claim *resourceapi.ResourceClaim, deviceRequest *resourceapi.DeviceRequestAllocationResult) *resourceapi.AllocatedDeviceStatus {
	for i := range claim.Status.Devices {
		device := &claim.Status.Devices[i]
		if deviceRequest.Device == device.Device && deviceRequest.Driver == device.Driver && deviceRequest.Pool == device.Pool {
			return device
		}
	}
	return nil
}
