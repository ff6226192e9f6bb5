package operator

import (
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
func MetricsServer(bindAddress string, secure bool, certDir string) metricsserver.Options {
	o := metricsserver.Options{BindAddress: bindAddress}
	if secure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
		o.CertDir = certDir
	}
	return o
}
