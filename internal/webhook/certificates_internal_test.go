package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestRenew(t *testing.T) {
	hosts := []string{"webhook.ns.svc", "webhook.ns.svc.cluster.local"}
	c := &Certificates{o: CertificateOptions{Hosts: hosts}}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	valid, err := c.renew(nil, start)
	if err != nil {
		t.Fatal(err)
	}
	caPEM := func(data map[string][]byte) string { return string(data[corev1.ServiceAccountRootCAKey]) }

	type outcome struct {
		Renewed, NewCA bool
		Hosts          []string
	}
	for _, tt := range []struct {
		name  string
		data  map[string][]byte
		hosts []string
		now   time.Time
		want  outcome
	}{
		{name: "empty Secret", data: nil, now: start, want: outcome{Renewed: true, NewCA: true, Hosts: hosts}},
		{name: "valid", data: valid, now: start.Add(24 * time.Hour)},
		{name: "serving certificate with a fifth of its validity left", data: valid, now: start.Add(servingValidity*4/5 + time.Hour),
			want: outcome{Renewed: true, Hosts: hosts}},
		{name: "other Service", data: valid, hosts: []string{"other.ns.svc"}, now: start,
			want: outcome{Renewed: true, Hosts: []string{"other.ns.svc"}}},
		{name: "CA with a fifth of its validity left", data: valid, now: start.Add(caValidity*4/5 + time.Hour),
			want: outcome{Renewed: true, NewCA: true, Hosts: hosts}},
		{name: "CA key of another CA", data: map[string][]byte{
			corev1.ServiceAccountRootCAKey: valid[corev1.ServiceAccountRootCAKey],
			caKey:                          mustRenew(t, c, start)[caKey],
			corev1.TLSCertKey:              valid[corev1.TLSCertKey],
			corev1.TLSPrivateKeyKey:        valid[corev1.TLSPrivateKeyKey],
		}, now: start, want: outcome{Renewed: true, NewCA: true, Hosts: hosts}},
		{name: "garbage", data: map[string][]byte{corev1.ServiceAccountRootCAKey: []byte("x"), caKey: []byte("y")}, now: start,
			want: outcome{Renewed: true, NewCA: true, Hosts: hosts}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &Certificates{o: CertificateOptions{Hosts: hosts}}
			if tt.hosts != nil {
				c.o.Hosts = tt.hosts
			}
			got, err := c.renew(tt.data, tt.now)
			if err != nil {
				t.Fatal(err)
			}
			var o outcome
			if got != nil {
				o = outcome{Renewed: true, NewCA: caPEM(got) != caPEM(tt.data), Hosts: servingChain(t, got, tt.now)}
			}
			if diff := cmp.Diff(tt.want, o); diff != "" {
				t.Errorf("renew (-want +got):\n%s", diff)
			}
		})
	}
}

func mustRenew(t *testing.T, c *Certificates, now time.Time) map[string][]byte {
	t.Helper()
	data, err := c.renew(nil, now)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// servingChain verifies data's serving certificate against its CA at now,
// as the API server does with the caBundle, and returns its DNS names.
func servingChain(t *testing.T, data map[string][]byte, now time.Time) []string {
	t.Helper()
	pair, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data[corev1.ServiceAccountRootCAKey])
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range pair.Leaf.DNSNames {
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, CurrentTime: now}); err != nil {
			t.Errorf("serving certificate for %s: %v", name, err)
		}
	}
	return pair.Leaf.DNSNames
}
