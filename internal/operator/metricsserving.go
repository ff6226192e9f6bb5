package operator

import (
	"net/http"
	"net/http/pprof"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// MetricsServer returns the options of the metrics endpoint listening on
// bindAddress ("0" disables it). Secure, it serves HTTPS and lets a request
// through only when the API server authenticates its bearer token
// (TokenReview) and authorizes it for GET on the path (SubjectAccessReview),
// as kube-scheduler's secure port does: the manager's own client makes both
// reviews, so the operator needs to create them, and scrapers need the
// metrics-reader ClusterRole. certDir holds tls.crt and tls.key, reloaded
// when they change; empty, or without those files, the server makes a
// self-signed certificate at start. Not secure, it serves plain HTTP to
// anyone who reaches bindAddress: for loopback only.
//
// profiling adds Go's profiles under /debug/pprof/ on the same endpoint,
// behind the same filter, as kube-scheduler's enableProfiling does on its
// secure port: reading them takes GET on those paths, which the
// metrics-reader role does not grant.
func MetricsServer(bindAddress string, secure bool, certDir string, profiling bool) metricsserver.Options {
	o := metricsserver.Options{BindAddress: bindAddress}
	if secure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
		o.CertDir = certDir
	}
	if profiling {
		o.ExtraHandlers = map[string]http.Handler{
			"/debug/pprof/":        http.HandlerFunc(pprof.Index),
			"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
			"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
			"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
			"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
		}
	}
	return o
}
