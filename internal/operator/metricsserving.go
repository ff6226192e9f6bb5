package operator

import (
	"fmt"
	"net"
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
// metrics-reader role does not grant. On a plain-HTTP endpoint nothing
// checks the caller, and a profile shows the process's memory and command
// line, so profiling is refused there unless the endpoint listens on
// loopback only.
func MetricsServer(bindAddress string, secure bool, certDir string, profiling bool) (metricsserver.Options, error) {
	o := metricsserver.Options{BindAddress: bindAddress}
	if secure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
		o.CertDir = certDir
	}
	if profiling && bindAddress != "0" {
		if !secure && !IsLoopbackAddress(bindAddress) {
			return o, fmt.Errorf("profiling would serve /debug/pprof/ to anyone who reaches %q: the plain-HTTP metrics endpoint checks no caller; "+
				"keep the metrics endpoint secure, bind it to loopback (for example 127.0.0.1:8080), or turn profiling off", bindAddress)
		}
		o.ExtraHandlers = map[string]http.Handler{
			"/debug/pprof/":        http.HandlerFunc(pprof.Index),
			"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
			"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
			"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
			"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
		}
	}
	return o, nil
}

// IsLoopbackAddress tells whether a listen address (host:port) reaches the
// loopback interface only: an IP literal in 127.0.0.0/8 or ::1, or
// "localhost". An empty host (":8080") listens on every interface.
func IsLoopbackAddress(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
