package profilebuild

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
)

// specHashLength is how many hex digits of the SHA-256 SpecHash keeps:
// 64 bits, enough to tell apart the specs one profile goes through, and
// short enough to read in a status or a terminal.
const specHashLength = 16

// SpecHash identifies what spec compiles to, whichever profile it is in:
// a shadow and the live profile it is promoted into have the same hash
// when they would place pods alike. shadowOf and schedulerName are left
// out: a shadow evaluates the placements of the name it shadows, and
// promotion keeps the live profile's name.
//
// The hash is of canonical JSON (object keys sorted, no spacing), so it
// does not depend on the order of the keys of a plugin's args as written
// or as the API server stores them.
func SpecHash(spec *schedulingv1alpha1.SchedulingProfileSpec) string {
	compiled := spec.DeepCopy()
	compiled.ShadowOf, compiled.SchedulerName = nil, nil
	for i := range compiled.PluginConfig {
		// Args the API server stored are JSON; args of a manifest not
		// yet checked may not be, and still get a hash of their bytes.
		if raw := compiled.PluginConfig[i].Args.Raw; raw != nil && !json.Valid(raw) {
			quoted, _ := json.Marshal(string(raw))
			compiled.PluginConfig[i].Args.Raw = quoted
		}
	}
	// Neither can fail: every value is a plain type or valid JSON.
	data, _ := json.Marshal(compiled)
	var v any
	_ = json.Unmarshal(data, &v)
	// Marshalling a map sorts its keys.
	canonical, _ := json.Marshal(v)
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])[:specHashLength]
}
