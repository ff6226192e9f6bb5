package kubectlplugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidatePodUIDAndAhead(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts options
		want string
	}{
		{name: "one name pinned", opts: options{names: []string{"web-0"}, podUID: "u"}},
		{name: "one pod ahead", opts: options{names: []string{"pod/web-0"}, ahead: true}},
		{name: "a pin for two names", opts: options{names: []string{"a", "b"}, podUID: "u"},
			want: "--pod-uid pins one pod: name exactly one waitingpod/NAME or pod/NAME, without --all or --undo"},
		{name: "a pin for --all", opts: options{all: true, podUID: "u"},
			want: "--pod-uid pins one pod: name exactly one waitingpod/NAME or pod/NAME, without --all or --undo"},
		{name: "a pinned group", opts: options{names: []string{"pg/train"}, podUID: "u"},
			want: `"pg/train": --pod-uid and --ahead take waitingpod/NAME or pod/NAME: a group's members are decided as the operator holds them`},
		{name: "a group ahead", opts: options{names: []string{"podgroup/train"}, ahead: true},
			want: `"podgroup/train": --pod-uid and --ahead take waitingpod/NAME or pod/NAME: a group's members are decided as the operator holds them`},
		{name: "--all ahead", opts: options{all: true, ahead: true}, want: "--ahead goes with waitingpod/NAME or pod/NAME, not --all or --undo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.dryRun = "none"
			got := ""
			if err := tc.opts.validate(); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("validate (-want +got):\n%s", diff)
			}
		})
	}
}
