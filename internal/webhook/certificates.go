package webhook

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// The operator keeps the webhook's certificate itself rather than through
// cert-manager, so that config/default installs without it: every replica
// runs Certificates, which keeps a CA and a serving certificate for the
// webhook Service in one Secret of the operator's namespace (the Secret
// config/webhook installs empty) and the CA in the caBundle of the
// ValidatingWebhookConfiguration. Replicas agree through the Secret: the
// first to find it empty or expiring writes it, with its resourceVersion,
// and the others, refused with a conflict, read what it wrote.
//
// Rights: get and update on that one Secret and that one configuration,
// by name (config/rbac); nothing is listed or watched.

// +kubebuilder:rbac:groups="",resources=secrets,verbs=update,resourceNames=profile-scheduler-webhook-cert,namespace=system
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;update,resourceNames=profile-scheduler-validating-webhook-configuration

const (
	// caValidity and servingValidity are how long the CA and the
	// serving certificate are valid; each is renewed once less than a
	// fifth of it remains.
	caValidity      = 10 * 365 * 24 * time.Hour
	servingValidity = 365 * 24 * time.Hour
	// checkInterval is how often a replica reads the Secret: how soon it
	// serves what another replica renewed, and how soon a caBundle
	// someone removed comes back.
	checkInterval = time.Minute
	// caKey is the Secret's key of the CA's private key; ca.crt,
	// tls.crt and tls.key are the usual ones.
	caKey = "ca.key"
	// fieldManager owns the Secret's data and the caBundles.
	fieldManager = "profile-scheduler-webhook-certificates"
)

// CertificateOptions name what Certificates keeps.
type CertificateOptions struct {
	// Secret holds the CA and the serving certificate.
	Secret types.NamespacedName
	// WebhookConfiguration is the ValidatingWebhookConfiguration whose
	// webhooks' caBundle is the CA.
	WebhookConfiguration string
	// Hosts are the serving certificate's DNS names: the webhook
	// Service's.
	Hosts []string
}

// ServiceHosts are the DNS names the API server may call a Service by.
func ServiceHosts(service, namespace string) []string {
	return []string{service + "." + namespace + ".svc", service + "." + namespace + ".svc.cluster.local"}
}

// Certificates keeps the webhook's serving certificate and the caBundle
// that trusts it. It is a manager.Runnable on every replica.
type Certificates struct {
	o      CertificateOptions
	client kubernetes.Interface
	clock  clock.Clock
	// serving is what the webhook server presents; nil until the
	// Secret holds a valid certificate.
	serving atomic.Pointer[tls.Certificate]
	// injected is set once the configuration's caBundle was seen to
	// hold the CA that signed serving.
	injected atomic.Bool
}

// NewCertificates returns Certificates writing with cfg. cfg must not be
// fenced by the leader Lease: standbys serve the webhook too, and the
// first replica up, leader or not, writes the certificate.
func NewCertificates(cfg *rest.Config, o CertificateOptions) (*Certificates, error) {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Certificates{o: o, client: c, clock: clock.RealClock{}}, nil
}

// TLS makes a webhook server present the certificate Certificates keeps
// (webhook.Options.TLSOpts); the server then reads no files.
func (c *Certificates) TLS(cfg *tls.Config) {
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if cert := c.serving.Load(); cert != nil {
			return cert, nil
		}
		return nil, errors.New("the webhook's serving certificate is not ready yet")
	}
}

// SetupWithManager runs c on every replica of mgr and keeps each replica
// unready until it serves a certificate the API server trusts, so the
// webhook Service sends no request to a replica that would fail it.
func (c *Certificates) SetupWithManager(mgr manager.Manager) error {
	if err := mgr.Add(c); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("webhook-certificate", c.Ready)
}

// Ready reports whether the certificate is served and trusted.
func (c *Certificates) Ready(*http.Request) error {
	if c.serving.Load() == nil {
		return fmt.Errorf("no serving certificate from Secret %s yet", c.o.Secret)
	}
	if !c.injected.Load() {
		return fmt.Errorf("the caBundle of ValidatingWebhookConfiguration %s does not hold the CA yet", c.o.WebhookConfiguration)
	}
	return nil
}

// NeedLeaderElection is false: every replica serves the webhook.
func (c *Certificates) NeedLeaderElection() bool { return false }

// Start keeps the certificate until ctx ends: at once, then every
// checkInterval, retrying a failed round sooner.
func (c *Certificates) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("webhook-certificates")
	ctx = klog.NewContext(ctx, logger)
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 6, Cap: checkInterval}
	next := backoff
	for {
		delay := checkInterval
		if err := c.sync(ctx); err != nil {
			logger.Error(err, "Keeping the webhook's certificate", "secret", c.o.Secret, "webhookConfiguration", c.o.WebhookConfiguration)
			delay = next.Step()
		} else {
			next = backoff
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(delay):
		}
	}
}

// sync makes the Secret hold a valid CA and serving certificate, serves
// it, and puts the CA in the configuration's caBundle.
func (c *Certificates) sync(ctx context.Context) error {
	secret, err := c.client.CoreV1().Secrets(c.o.Secret.Namespace).Get(ctx, c.o.Secret.Name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("secret %s not found: config/webhook installs it, empty, for the operator to fill", c.o.Secret)
		}
		return err
	}
	now := c.clock.Now()
	if renewed, err := c.renew(secret.Data, now); err != nil {
		return err
	} else if renewed != nil {
		secret = secret.DeepCopy()
		secret.Data = renewed
		// The resourceVersion read makes this a compare-and-swap: of
		// replicas renewing at once one wins, and the others read its
		// certificate on their next round.
		if secret, err = c.client.CoreV1().Secrets(secret.Namespace).Update(ctx, secret, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
			if apierrors.IsConflict(err) {
				return fmt.Errorf("another replica wrote the webhook's certificate first; reading it next: %w", err)
			}
			return fmt.Errorf("writing the webhook's certificate: %w", err)
		}
		klog.FromContext(ctx).Info("Wrote a new webhook certificate", "secret", klog.KObj(secret))
	}
	cert, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return fmt.Errorf("secret %s: %w", c.o.Secret, err)
	}
	if old := c.serving.Load(); old == nil || !bytes.Equal(old.Certificate[0], cert.Certificate[0]) {
		c.serving.Store(&cert)
	}
	return c.inject(ctx, secret.Data[corev1.ServiceAccountRootCAKey])
}

// renew returns the Secret's data with what must be renewed renewed, or
// nil when all is valid for long enough.
func (c *Certificates) renew(data map[string][]byte, now time.Time) (map[string][]byte, error) {
	ca, caPriv, err := parseCA(data)
	if err != nil || expiring(ca, caValidity, now) {
		if ca, caPriv, err = newCA(now); err != nil {
			return nil, err
		}
	} else if c.servingValid(data, ca, now) {
		return nil, nil
	}
	certPEM, keyPEM, err := newServing(ca, caPriv, c.o.Hosts, now)
	if err != nil {
		return nil, err
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caPriv)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		corev1.ServiceAccountRootCAKey: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
		caKey:                          pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: caKeyDER}),
		corev1.TLSCertKey:              certPEM,
		corev1.TLSPrivateKeyKey:        keyPEM,
	}, nil
}

// servingValid says whether the Secret's serving certificate is signed by
// ca, names exactly the hosts, and is not expiring.
func (c *Certificates) servingValid(data map[string][]byte, ca *x509.Certificate, now time.Time) bool {
	pair, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return false
	}
	leaf := pair.Leaf
	if leaf.CheckSignatureFrom(ca) != nil || !slices.Equal(leaf.DNSNames, c.o.Hosts) {
		return false
	}
	return !expiring(leaf, servingValidity, now)
}

// expiring says whether less than a fifth of cert's validity remains, or
// it is not valid yet.
func expiring(cert *x509.Certificate, validity time.Duration, now time.Time) bool {
	return now.Before(cert.NotBefore) || now.Add(validity/5).After(cert.NotAfter)
}

// inject puts ca in every webhook's caBundle of the configuration.
func (c *Certificates) inject(ctx context.Context, ca []byte) error {
	configs := c.client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	vwc, err := configs.Get(ctx, c.o.WebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", c.o.WebhookConfiguration, err)
	}
	if !needsCA(vwc, ca) {
		c.injected.Store(true)
		return nil
	}
	vwc = vwc.DeepCopy()
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig.CABundle = ca
	}
	if _, err := configs.Update(ctx, vwc, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("setting the caBundle of ValidatingWebhookConfiguration %s: %w", c.o.WebhookConfiguration, err)
	}
	klog.FromContext(ctx).Info("Set the webhook's caBundle", "webhookConfiguration", c.o.WebhookConfiguration)
	c.injected.Store(true)
	return nil
}

func needsCA(vwc *admissionregistrationv1.ValidatingWebhookConfiguration, ca []byte) bool {
	for _, w := range vwc.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, ca) {
			return true
		}
	}
	return false
}

func parseCA(data map[string][]byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certBlock, _ := pem.Decode(data[corev1.ServiceAccountRootCAKey])
	keyBlock, _ := pem.Decode(data[caKey])
	if certBlock == nil || keyBlock == nil {
		return nil, nil, errors.New("no CA")
	}
	ca, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, nil, err
	}
	if !key.PublicKey.Equal(ca.PublicKey) {
		return nil, nil, errors.New("the CA's key does not match its certificate")
	}
	return ca, key, nil
}

func newCA(now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("profile-scheduler-webhook-ca@%d", now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

func newServing(ca *x509.Certificate, caPriv *ecdsa.PrivateKey, hosts []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: hosts[0]},
		DNSNames:     hosts,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(servingValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caPriv)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// serial is a random 128-bit serial number, as RFC 5280 asks.
func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}
