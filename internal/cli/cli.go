// Package cli implements the subcommands of the profile-scheduler binary
// that need no cluster: `validate` checks SchedulingProfile manifests as
// the API server and the operator would, and `convert` turns an upstream
// KubeSchedulerConfiguration into SchedulingProfile manifests. Both judge
// profiles through internal/profilebuild with the operator's own flags, so
// CI, apply time and status agree.
package cli

import (
	"flag"
	"fmt"
	"io"
)

// Exit codes of the subcommands.
const (
	// ExitRefused means a profile was refused, or a document could not
	// be decoded.
	ExitRefused = 1
	// ExitUsage means the command could not run: bad flags or arguments,
	// an unreadable file.
	ExitUsage = 2
)

// defaultNamespace is the operator's namespace in the install manifests
// (config/default), named in messages about extenders' TLS Secrets.
const defaultNamespace = "profile-scheduler-system"

// Streams are a command's standard input, output and error.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// Usage lists the subcommands, for the operator's -h.
const Usage = `Usage:
  profile-scheduler [flags]                  run the operator
  profile-scheduler validate [flags] PATH... check SchedulingProfile manifests offline
  profile-scheduler convert [flags] FILE     turn a KubeSchedulerConfiguration into SchedulingProfiles
  profile-scheduler promote [flags] SHADOW   make the live profile serve a shadow's evaluated spec
  profile-scheduler help                     print this help (also -h, --help)

Run "profile-scheduler validate -h", "convert -h" or "promote -h" for a
subcommand's flags. The operator's flags:
`

// newFlagSet returns a subcommand's flag set, which reports to s.Err.
func newFlagSet(name, usage string, s Streams) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(s.Err)
	fs.Usage = func() {
		_, _ = fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	return fs
}
