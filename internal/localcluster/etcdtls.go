package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// etcdTLS are the files that keep etcd private to kube-apiserver: etcd
// serves its clients over TLS only, and answers only a client with a
// certificate of a CA generated for the run, whose files are in the
// cluster's private directory. Without it any local user could read every
// object, Secrets included, from etcd's loopback port.
type etcdTLS struct {
	caFile, serverCert, serverKey, clientCert, clientKey string
	// clientURL is where etcd serves its clients, once configured.
	clientURL *url.URL
}

// etcdCertValidity is how long the run's etcd certificates are valid: a
// local run lasts hours, not weeks.
const etcdCertValidity = 30 * 24 * time.Hour

// newEtcdTLS writes a CA, etcd's serving certificate for 127.0.0.1 and a
// client certificate for kube-apiserver into dir, which it creates with
// mode 0700.
func newEtcdTLS(dir string) (*etcdTLS, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "localcluster-etcd-ca"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := signCertificate(caTmpl, caTmpl, &caKey.PublicKey, caKey, now)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	t := &etcdTLS{
		caFile:     filepath.Join(dir, "ca.crt"),
		serverCert: filepath.Join(dir, "server.crt"),
		serverKey:  filepath.Join(dir, "server.key"),
		clientCert: filepath.Join(dir, "apiserver-etcd-client.crt"),
		clientKey:  filepath.Join(dir, "apiserver-etcd-client.key"),
	}
	if err := writePEM(t.caFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	for _, leaf := range []struct {
		tmpl           *x509.Certificate
		certFile, file string
	}{
		{&x509.Certificate{
			Subject:     pkix.Name{CommonName: "etcd"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			// etcd's HTTP gateway calls its gRPC server with this
			// certificate too.
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}, t.serverCert, t.serverKey},
		{&x509.Certificate{
			Subject:     pkix.Name{CommonName: "kube-apiserver-etcd-client"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}, t.clientCert, t.clientKey},
	} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		leaf.tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := signCertificate(leaf.tmpl, ca, &key.PublicKey, caKey, now)
		if err != nil {
			return nil, err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		if err := writePEM(leaf.certFile, "CERTIFICATE", der); err != nil {
			return nil, err
		}
		if err := writePEM(leaf.file, "EC PRIVATE KEY", keyDER); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// signCertificate fills in tmpl's serial number and validity and signs it.
func signCertificate(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey, now time.Time) ([]byte, error) {
	// A random 128-bit serial number, as RFC 5280 asks.
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = sn
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(etcdCertValidity)
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
}

func writePEM(path, blockType string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600)
}

// configure makes etcd serve its clients with TLS and client certificates
// only, on a loopback port of its own, and kube-apiserver connect with its
// client certificate. envtest checks etcd's health, and gives
// kube-apiserver its URL, over plain HTTP: that URL is etcd's metrics
// listener, which serves /health and /metrics and no key, and
// kube-apiserver is given the TLS one instead.
func (t *etcdTLS) configure(etcd *envtest.Etcd, api *envtest.APIServer) error {
	client, err := freeLoopbackURL("https")
	if err != nil {
		return err
	}
	metrics, err := freeLoopbackURL("http")
	if err != nil {
		return err
	}
	t.clientURL, etcd.URL = client, metrics
	etcd.Configure().
		Set("listen-client-urls", client.String()).
		Set("advertise-client-urls", client.String()).
		Set("listen-metrics-urls", metrics.String()).
		Set("client-cert-auth", "true").
		Set("trusted-ca-file", t.caFile).
		Set("cert-file", t.serverCert).
		Set("key-file", t.serverKey)
	api.Configure().
		Set("etcd-servers", client.String()).
		Set("etcd-cafile", t.caFile).
		Set("etcd-certfile", t.clientCert).
		Set("etcd-keyfile", t.clientKey)
	return nil
}

// freeLoopbackURL is a URL of a loopback port nothing listens on now, for
// etcd to listen on (envtest picks its ports the same way).
func freeLoopbackURL(scheme string) (*url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return nil, fmt.Errorf("picking a port for etcd: %w", err)
	}
	return &url.URL{Scheme: scheme, Host: addr}, nil
}
