// Package runtime builds and runs framework instances: one instance per
// scheduling profile, made from a Registry of plugin factories and an
// upstream KubeSchedulerProfile (kubescheduler.config.k8s.io/v1).
//
// NewFramework validates the profile while it builds the instance and
// refuses it with a *ConfigError naming the plugin and the extension point,
// so a profile controller can report the problem and keep serving the last
// good instance. The instance's Run*Plugins methods follow kube-scheduler's
// semantics; pods held at Permit are kept in a waiting-pods map that people
// (through the Handle) can allow or reject.
package runtime
