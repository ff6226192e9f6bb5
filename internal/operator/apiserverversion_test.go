package operator

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/tools/events"
)

func TestAPIServerSkew(t *testing.T) {
	sched := version.MustParseGeneric(SchedulerVersion)
	const (
		older = "older than kube-scheduler 1.37, whose behaviour this operator follows and which must not be newer than the API server (supported: 1.37 and 1.38)"
		newer = "more than one minor version newer than kube-scheduler 1.37, whose behaviour this operator follows (supported: 1.37 and 1.38)"
	)
	for _, tt := range []struct {
		name    string
		info    apimachineryversion.Info
		want    string
		wantErr string
	}{
		{name: "same release", info: apimachineryversion.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2"}},
		{name: "earlier patch", info: apimachineryversion.Info{Major: "1", Minor: "37", GitVersion: "v1.37.0"}},
		{name: "one minor newer", info: apimachineryversion.Info{Major: "1", Minor: "38", GitVersion: "v1.38.1"}},
		{name: "managed cluster's minor", info: apimachineryversion.Info{Major: "1", Minor: "38+", GitVersion: "v1.38.4-gke.1200"}},
		{name: "one minor older", info: apimachineryversion.Info{Major: "1", Minor: "36", GitVersion: "v1.36.3"},
			want: "kube-apiserver v1.36.3 is " + older},
		{name: "much older", info: apimachineryversion.Info{Major: "1", Minor: "33+", GitVersion: "v1.33.5-eks-1"},
			want: "kube-apiserver v1.33.5-eks-1 is " + older},
		{name: "two minors newer", info: apimachineryversion.Info{Major: "1", Minor: "39", GitVersion: "v1.39.0"},
			want: "kube-apiserver v1.39.0 is " + newer},
		{name: "next major", info: apimachineryversion.Info{Major: "2", Minor: "0", GitVersion: "v2.0.0"},
			want: "kube-apiserver v2.0.0 is " + newer},
		{name: "emulating its own version", info: apimachineryversion.Info{Major: "1", Minor: "38", EmulationMajor: "1", EmulationMinor: "38", GitVersion: "v1.38.0"}},
		{name: "emulating a supported version", info: apimachineryversion.Info{Major: "1", Minor: "38", EmulationMajor: "1", EmulationMinor: "37", GitVersion: "v1.38.0"}},
		{name: "emulating an older version", info: apimachineryversion.Info{Major: "1", Minor: "38", EmulationMajor: "1", EmulationMinor: "36", GitVersion: "v1.38.0"},
			want: "kube-apiserver v1.38.0 emulating 1.36 is " + older},
		{name: "git version only", info: apimachineryversion.Info{GitVersion: "v1.36.3"},
			want: "kube-apiserver v1.36.3 is " + older},
		{name: "no version", info: apimachineryversion.Info{GitVersion: "v0.0.0-master+$Format:%H$"},
			want: "kube-apiserver v0.0.0-master+$Format:%H$ is " + older},
		{name: "nothing", info: apimachineryversion.Info{},
			wantErr: `the API server reports no version to compare: could not parse "" as version`},
		{name: "not numbers", info: apimachineryversion.Info{Major: "1", Minor: "x"},
			wantErr: `the API server reports version "1"."x", not two numbers`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := apiServerSkew(&tt.info, sched)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Errorf("error %q, want %q", gotErr, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// serverVersion answers the discovery call with a fixed version.
type serverVersion struct {
	info *apimachineryversion.Info
	err  error
}

func (s serverVersion) ServerVersionWithContext(context.Context) (*apimachineryversion.Info, error) {
	return s.info, s.err
}

func TestCheckAPIServerVersion(t *testing.T) {
	regarding := &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: "ops"}
	for _, tt := range []struct {
		name       string
		server     serverVersion
		wantEvents []string
		wantErr    string
	}{
		{name: "supported", server: serverVersion{info: &apimachineryversion.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2"}}},
		{name: "older", server: serverVersion{info: &apimachineryversion.Info{Major: "1", Minor: "36", GitVersion: "v1.36.3"}},
			wantEvents: []string{"Warning UnsupportedAPIServerVersion kube-apiserver v1.36.3 is older than kube-scheduler 1.37, whose behaviour this operator follows and which must not be newer than the API server (supported: 1.37 and 1.38)"}},
		{name: "unreachable", server: serverVersion{err: errors.New("connection refused")},
			wantErr: "reading the API server's version: connection refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			recorder := events.NewFakeRecorder(10)
			_, err := CheckAPIServerVersion(context.Background(), tt.server, recorder, regarding, version.MustParseGeneric(SchedulerVersion))
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Errorf("error %q, want %q", gotErr, tt.wantErr)
			}
			close(recorder.Events)
			var got []string
			for e := range recorder.Events {
				got = append(got, e)
			}
			if diff := cmp.Diff(tt.wantEvents, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOperatorObject(t *testing.T) {
	t.Setenv("POD_NAME", "")
	if diff := cmp.Diff(&corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: "ops"}, operatorObject("ops")); diff != "" {
		t.Errorf("outside a Pod (-want +got):\n%s", diff)
	}
	t.Setenv("POD_NAME", "profile-scheduler-abc")
	t.Setenv("POD_UID", "1234")
	if diff := cmp.Diff(&corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "ops", Name: "profile-scheduler-abc", UID: "1234"}, operatorObject("ops")); diff != "" {
		t.Errorf("in a Pod (-want +got):\n%s", diff)
	}
}
