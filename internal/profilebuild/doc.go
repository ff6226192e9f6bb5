// Package profilebuild is the profile compiler: the one way a
// SchedulingProfile's spec becomes a framework instance, for every caller
// alike (the SchedulingProfile controller, its restore after a restart,
// shadows, the admission webhook, and `profile-scheduler validate` and
// `convert`). A spec is refused at apply time, in CI and in status with the
// same reasons and messages.
//
// It has two steps:
//   - Plan is pure: it converts the spec to upstream's KubeSchedulerProfile
//     and the options the instance is built with (extenders in upstream's
//     form, the extender policy, the default plugins), checks the reserved
//     names, the size and the extenders, and lists the Secrets the
//     extenders reference. It reads nothing, so the CLI runs it offline.
//   - Compile reads those Secrets through the caller's SecretReader and
//     builds the instance with runtime.NewFramework, its only production
//     caller, in an Environment: the scheduling loop's wiring, or an
//     offline one that serves nothing. The options go in the same order for
//     every caller.
//
// Both steps report every refusal they find, each with its field path,
// not only the first.
//
// What only the set of stored profiles can tell (whether an older profile
// claims the same schedulerName) stays the controller's.
package profilebuild
