// Package crd embeds the CustomResourceDefinitions controller-gen writes to
// bases/, so that `profile-scheduler validate` checks manifests against the
// very schema the API server enforces.
package crd

import _ "embed"

// SchedulingProfiles is the SchedulingProfile CRD as YAML.
//
//go:embed bases/scheduling.schedprofiles.io_schedulingprofiles.yaml
var SchedulingProfiles string
