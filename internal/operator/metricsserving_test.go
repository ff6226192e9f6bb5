package operator

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func TestMetricsServerProfiling(t *testing.T) {
	pprofPaths := []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/profile", "/debug/pprof/symbol", "/debug/pprof/trace"}
	for _, tc := range []struct {
		name      string
		address   string
		secure    bool
		profiling bool
		wantPaths []string
		wantErr   string
	}{
		{name: "secure on every interface", address: ":8443", secure: true, profiling: true, wantPaths: pprofPaths},
		{name: "plain on IPv4 loopback", address: "127.0.0.1:8080", profiling: true, wantPaths: pprofPaths},
		{name: "plain on IPv6 loopback", address: "[::1]:8080", profiling: true, wantPaths: pprofPaths},
		{name: "plain on localhost", address: "localhost:8080", profiling: true, wantPaths: pprofPaths},
		{name: "plain on every interface", address: ":8080", profiling: true, wantErr: `profiling would serve /debug/pprof/ to anyone who reaches ":8080"`},
		{name: "plain on the unspecified address", address: "0.0.0.0:8080", profiling: true, wantErr: `anyone who reaches "0.0.0.0:8080"`},
		{name: "plain on a routable address", address: "10.0.0.7:8080", profiling: true, wantErr: `anyone who reaches "10.0.0.7:8080"`},
		{name: "plain on a host name", address: "scheduler.example.com:8080", profiling: true, wantErr: "checks no caller"},
		{name: "plain without profiling", address: ":8080"},
		{name: "metrics off", address: "0", profiling: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := MetricsServer(tc.address, tc.secure, "", tc.profiling)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error containing %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for path := range o.ExtraHandlers {
				paths = append(paths, path)
			}
			slices.Sort(paths)
			if diff := cmp.Diff(tc.wantPaths, paths); diff != "" {
				t.Errorf("profile handlers (-want +got):\n%s", diff)
			}
			if o.SecureServing != tc.secure {
				t.Errorf("SecureServing = %v, want %v", o.SecureServing, tc.secure)
			}
		})
	}
}

// TestMetricsServerVerifiableCertificate serves the secure endpoint as
// config/prometheus deploys it, with a certificate mounted for the metrics
// Service's name, and checks that a scraper that trusts only the issuing CA
// and names that server completes the handshake, as a ServiceMonitor
// without insecureSkipVerify does; and that the self-signed certificate the
// endpoint makes without one fails the same check.
func TestMetricsServerVerifiableCertificate(t *testing.T) {
	const serverName = "profile-scheduler-metrics.profile-scheduler-system.svc"
	caPEM, certPEM, keyPEM := issue(t, serverName)
	certDir := t.TempDir()
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("cannot parse the CA")
	}

	mounted := serve(t, certDir)
	if err := handshake(mounted, roots, serverName); err != nil {
		t.Errorf("verifying the mounted certificate for %s: %v", serverName, err)
	}
	var refused *tls.CertificateVerificationError
	if err := handshake(mounted, roots, "elsewhere.example.com"); !errors.As(err, &refused) {
		t.Errorf("the mounted certificate for a name it was not issued for: want a verification error, got %v", err)
	}
	selfSigned := serve(t, "")
	if err := handshake(selfSigned, roots, serverName); !errors.As(err, &refused) {
		t.Errorf("the self-signed certificate: want a verification error, got %v", err)
	}
}

// serve starts the secure metrics endpoint on a free loopback port with the
// certificate in certDir (a self-signed one when empty) and returns its
// address. Nothing asks the API server: the handshake comes first.
func serve(t *testing.T, certDir string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	o, err := MetricsServer(address, true, certDir, false)
	if err != nil {
		t.Fatal(err)
	}
	if certDir == "" {
		// Not the shared default directory, which another test might fill.
		o.CertDir = t.TempDir()
	}
	srv, err := metricsserver.NewServer(o, &rest.Config{Host: "https://127.0.0.1:1"}, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("metrics server: %v", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.Dial("tcp", address)
		if err == nil {
			_ = conn.Close()
			return address
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metrics endpoint did not listen on %s: %v", address, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func handshake(address string, roots *x509.CertPool, serverName string) error {
	conn, err := tls.Dial("tcp", address, &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	return conn.Close()
}

// issue makes a CA and a serving certificate for dnsName signed by it, as
// cert-manager's Certificate in config/prometheus does, all PEM-encoded.
func issue(t *testing.T, dnsName string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "metrics test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: dnsName},
		DNSNames:     []string{dnsName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, caTemplate, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
