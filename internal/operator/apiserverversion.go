package operator

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
)

// SchedulerVersion is the kube-scheduler release whose behaviour the
// operator follows (docs/compatibility.md). The API servers it supports are
// those upstream's version-skew policy lets that kube-scheduler talk to.
const SchedulerVersion = "1.37.2"

// ReasonUnsupportedAPIServerVersion is the reason of the Warning event an
// API server outside the supported version skew gets.
const ReasonUnsupportedAPIServerVersion = "UnsupportedAPIServerVersion"

// CheckAPIServerVersion reads the API server's version once and compares it
// with what a kube-scheduler of version sched may talk to. An unsupported
// server is reported in one log line and a Warning event about regarding, so
// that it is known before anything fails because of it; a supported one is
// logged at V(1). It returns the version the server reported, and an error
// only when there was none to compare.
func CheckAPIServerVersion(ctx context.Context, d discovery.ServerVersionInterfaceWithContext, recorder events.EventRecorder, regarding *corev1.ObjectReference, sched *version.Version) (*apimachineryversion.Info, error) {
	logger := klog.FromContext(ctx)
	info, err := d.ServerVersionWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's version: %w", err)
	}
	msg, err := apiServerSkew(info, sched)
	if err != nil {
		return info, err
	}
	if msg == "" {
		logger.V(1).Info("API server version is within the supported skew", "version", info.GitVersion, "kubeScheduler", sched.String())
		return info, nil
	}
	logger.Info("Unsupported API server version", "version", info.GitVersion, "kubeScheduler", sched.String(), "reason", msg)
	recorder.Eventf(regarding, nil, corev1.EventTypeWarning, ReasonUnsupportedAPIServerVersion, "CheckVersion", "%s", msg)
	return info, nil
}

// apiServerSkew applies upstream's version-skew policy for kube-scheduler
// to an API server's version: kube-scheduler must not be newer than the
// kube-apiserver, and may be up to one minor version older. It returns ""
// for a supported server, else why it is not supported. An API server run
// with --emulated-version behaves as the version it emulates, so that is
// the version compared when the server reports one.
func apiServerSkew(info *apimachineryversion.Info, sched *version.Version) (string, error) {
	server, err := serverMinor(info)
	if err != nil {
		return "", err
	}
	oldest := version.MajorMinor(sched.Major(), sched.Minor())
	newest := version.MajorMinor(sched.Major(), sched.Minor()+1)
	shown := info.GitVersion
	if shown == "" {
		shown = server.String()
	}
	if info.EmulationMinor != "" && (info.EmulationMajor != info.Major || info.EmulationMinor != strings.TrimSuffix(info.Minor, "+")) {
		shown += " emulating " + server.String()
	}
	supported := fmt.Sprintf("supported: %s and %s", oldest, newest)
	switch {
	case server.LessThan(oldest):
		return fmt.Sprintf("kube-apiserver %s is older than kube-scheduler %s, whose behaviour this operator follows and which must not be newer than the API server (%s)", shown, oldest, supported), nil
	case newest.LessThan(server):
		return fmt.Sprintf("kube-apiserver %s is more than one minor version newer than kube-scheduler %s, whose behaviour this operator follows (%s)", shown, oldest, supported), nil
	}
	return "", nil
}

// serverMinor is the major and minor version an API server behaves as: the
// emulation version when it reports one, else its binary version. Managed
// clusters may append "+" to the minor version; a server that reports no
// major and minor versions is judged by its git version.
func serverMinor(info *apimachineryversion.Info) (*version.Version, error) {
	major, minor := info.Major, info.Minor
	if info.EmulationMajor != "" || info.EmulationMinor != "" {
		major, minor = info.EmulationMajor, info.EmulationMinor
	}
	if major == "" && minor == "" {
		v, err := version.ParseGeneric(info.GitVersion)
		if err != nil {
			return nil, fmt.Errorf("the API server reports no version to compare: %w", err)
		}
		return version.MajorMinor(v.Major(), v.Minor()), nil
	}
	ma, errMajor := strconv.ParseUint(major, 10, 32)
	mi, errMinor := strconv.ParseUint(strings.TrimSuffix(minor, "+"), 10, 32)
	if errMajor != nil || errMinor != nil {
		return nil, fmt.Errorf("the API server reports version %q.%q, not two numbers", major, minor)
	}
	return version.MajorMinor(uint(ma), uint(mi)), nil
}

// operatorObject is what the operator's start-up events are about: the Pod
// it runs in, named by the downward API variables POD_NAME and POD_UID of
// its Deployment (config/manager), in namespace; outside a Pod (make run,
// run-local) the namespace itself.
func operatorObject(namespace string) *corev1.ObjectReference {
	if name := os.Getenv("POD_NAME"); name != "" {
		return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: namespace, Name: name, UID: types.UID(os.Getenv("POD_UID"))}
	}
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: namespace}
}
