// Package registry builds the smallest registry a plugin's tests can run a
// profile on: PrioritySort and DefaultBinder, which every profile needs,
// and the plugins under test. It is apart from plugins/testing because
// queuesort's and defaultbinder's own tests import that package.
package registry

import (
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/defaultbinder"
	"github.com/schedprofiles/profile-scheduler/scheduler/plugins/queuesort"
	"github.com/schedprofiles/profile-scheduler/scheduler/runtime"
)

// New returns a registry of PrioritySort, DefaultBinder and plugins, the
// latter without args. Register plugins that take args on the result. A
// name given twice is a mistake in the test and panics.
func New(plugins map[string]runtime.Factory) runtime.Registry {
	r := runtime.Registry{}
	register := func(name string, f runtime.Factory) {
		if err := r.Register(name, f, runtime.ArgsSpec{}); err != nil {
			panic(err)
		}
	}
	register(queuesort.Name, queuesort.New)
	register(defaultbinder.Name, defaultbinder.New)
	for name, f := range plugins {
		register(name, f)
	}
	return r
}
