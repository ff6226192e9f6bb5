// Package runtime builds and runs framework instances: one instance per
// scheduling profile, made from a Registry of plugin factories and an
// upstream KubeSchedulerProfile (kubescheduler.config.k8s.io/v1).
//
// NewFramework validates the profile while it builds the instance and
// refuses it with a *ConfigError naming the plugin and the extension point,
// so a profile controller can report the problem and keep serving the last
// good instance. The instance's Run*Plugins methods follow kube-scheduler
// 1.37; pods held at Permit are kept in a waiting-pods map that can be
// allowed or rejected from outside the scheduling loop, and pods whose
// binding cycle is in PreBind in a PodsInPreBind that preemption can
// cancel them through (shared by the scheduler's instances).
//
// Plugin args: each registration carries an ArgsSpec (New, Default,
// Validate). The runtime decodes pluginConfig[].args (JSON or YAML, strictly:
// unknown fields are errors) into New(), applies Default — also when the
// profile gives no args — and Validate, and hands the result to the
// factory. Plugins that exist upstream get upstream's args type and v1
// defaults automatically (UpstreamArgs); plugins without an ArgsSpec get the
// raw args as *runtime.Unknown, as upstream does for out-of-tree plugins.
//
// Defaults: WithDefaultPlugins gives the plugin set a profile is merged
// onto, with upstream's merge rules, so a profile naming no plugins runs
// exactly the defaults. There is no process-wide default: the scheduler
// passes the set it was configured with.
//
// Concurrency: an instance is immutable after NewFramework except for its
// waiting pods; Run* methods may be called from any goroutine. It observes
// the scheduler's metrics given with WithMetrics, and hands them to plugins
// through Handle.Metrics.
package runtime
