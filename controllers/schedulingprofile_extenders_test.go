package controllers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/schedprofiles/profile-scheduler/api/v1alpha1"
	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
)

func TestExtenderConfigs(t *testing.T) {
	forProfile := map[string]string{schedulingv1alpha1.ExtenderTLSLabel: "gpu"}
	cert, key := selfSignedPEM(t)
	ca, _ := selfSignedPEM(t)
	other, otherKey := selfSignedPEM(t)
	tlsSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: revisionNS, Name: "client", Labels: forProfile},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key},
	}
	caSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: revisionNS, Name: "ca", Labels: forProfile},
		Data:       map[string][]byte{"ca.crt": ca, "other.pem": other, "broken.pem": []byte("not a certificate")},
	}
	brokenPair := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: revisionNS, Name: "broken-client", Labels: forProfile},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: otherKey},
	}
	elsewhere := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ca", Labels: forProfile},
		Data:       map[string][]byte{"ca.crt": []byte("not this one")},
	}
	f := newProfileFixture(t, nil, tlsSecret, caSecret, brokenPair, elsewhere)
	base := schedulingv1alpha1.Extender{
		URLPrefix: "https://gpu.example:8443/scheduler", FilterVerb: "filter", PrioritizeVerb: "prioritize", Weight: 5,
		BindVerb: "bind", PreemptVerb: "preempt", EnableHTTPS: true, HTTPTimeout: metav1.Duration{Duration: 2 * time.Second},
		NodeCacheCapable: true, Ignorable: true,
		ManagedResources: []schedulingv1alpha1.ExtenderManagedResource{{Name: "example.com/gpu"}},
	}
	withTLS := func(tls schedulingv1alpha1.ExtenderTLSConfig) schedulingv1alpha1.Extender {
		e := base
		e.TLSConfig = &tls
		return e
	}
	upstream := configv1.Extender{
		URLPrefix: "https://gpu.example:8443/scheduler", FilterVerb: "filter", PrioritizeVerb: "prioritize", Weight: 5,
		BindVerb: "bind", PreemptVerb: "preempt", EnableHTTPS: true, HTTPTimeout: metav1.Duration{Duration: 2 * time.Second},
		NodeCacheCapable: true, Ignorable: true,
		ManagedResources: []configv1.ExtenderManagedResource{{Name: "example.com/gpu"}},
	}
	upstreamTLS := func(tls configv1.ExtenderTLSConfig) configv1.Extender {
		e := upstream
		e.TLSConfig = &tls
		return e
	}
	for _, tt := range []struct {
		name    string
		in      schedulingv1alpha1.Extender
		want    configv1.Extender
		wantErr string
	}{
		{name: "every upstream field", in: base, want: upstream},
		{
			name: "TLS from Secrets of the operator's namespace",
			in: withTLS(schedulingv1alpha1.ExtenderTLSConfig{ServerName: "gpu.example",
				CertSecretRef: &schedulingv1alpha1.LocalSecretReference{Name: "client"},
				CASecretRef:   &schedulingv1alpha1.SecretKeyReference{Name: "ca"}}),
			want: upstreamTLS(configv1.ExtenderTLSConfig{ServerName: "gpu.example", CertData: cert, KeyData: key, CAData: ca}),
		},
		{
			name: "a CA under another key",
			in:   withTLS(schedulingv1alpha1.ExtenderTLSConfig{CASecretRef: &schedulingv1alpha1.SecretKeyReference{Name: "ca", Key: "other.pem"}}),
			want: upstreamTLS(configv1.ExtenderTLSConfig{CAData: other}),
		},
		{
			name:    "a CA that is no certificate",
			in:      withTLS(schedulingv1alpha1.ExtenderTLSConfig{CASecretRef: &schedulingv1alpha1.SecretKeyReference{Name: "ca", Key: "broken.pem"}}),
			wantErr: "extenders[0].tlsConfig.caSecretRef: key broken.pem of Secret profile-scheduler-system/ca holds no PEM certificate; put the CA bundle there, and the profile is built again",
		},
		{
			name:    "a client certificate with another key",
			in:      withTLS(schedulingv1alpha1.ExtenderTLSConfig{CertSecretRef: &schedulingv1alpha1.LocalSecretReference{Name: "broken-client"}}),
			wantErr: "extenders[0].tlsConfig.certSecretRef: keys tls.crt and tls.key of Secret profile-scheduler-system/broken-client are not a PEM certificate and its key (tls: private key does not match public key)",
		},
		{
			name: "insecure",
			in:   withTLS(schedulingv1alpha1.ExtenderTLSConfig{Insecure: true}),
			want: upstreamTLS(configv1.ExtenderTLSConfig{Insecure: true}),
		},
		{
			name:    "inline key data is refused",
			in:      withTLS(schedulingv1alpha1.ExtenderTLSConfig{KeyData: []byte("key")}),
			wantErr: "extenders[0].tlsConfig.keyData: not supported in a SchedulingProfile, which anyone who may read profiles can read and which names no file of the operator's; put the material in a Secret in namespace profile-scheduler-system and set certSecretRef",
		},
		{
			name:    "file paths are refused",
			in:      withTLS(schedulingv1alpha1.ExtenderTLSConfig{CAFile: "/etc/ca.crt"}),
			wantErr: "extenders[0].tlsConfig.caFile: not supported",
		},
		{
			name:    "a missing Secret",
			in:      withTLS(schedulingv1alpha1.ExtenderTLSConfig{CertSecretRef: &schedulingv1alpha1.LocalSecretReference{Name: "absent"}}),
			wantErr: "extenders[0].tlsConfig.certSecretRef: no Secret absent in namespace profile-scheduler-system is labelled scheduling.schedprofiles.io/extender-tls=gpu and holds tls.crt and tls.key; create Secret profile-scheduler-system/absent with that label and keys tls.crt and tls.key, and the profile is built again",
		},
		{
			name:    "a CA Secret without the key",
			in:      withTLS(schedulingv1alpha1.ExtenderTLSConfig{CASecretRef: &schedulingv1alpha1.SecretKeyReference{Name: "client"}}),
			wantErr: "extenders[0].tlsConfig.caSecretRef: no Secret client in namespace profile-scheduler-system is labelled scheduling.schedprofiles.io/extender-tls=gpu and holds ca.crt",
		},
		{
			name: "ignoredByScheduler is kept",
			in: func() schedulingv1alpha1.Extender {
				e := base
				e.ManagedResources = []schedulingv1alpha1.ExtenderManagedResource{{Name: "example.com/gpu", IgnoredByScheduler: true}}
				return e
			}(),
			want: func() configv1.Extender {
				e := upstream
				e.ManagedResources = []configv1.ExtenderManagedResource{{Name: "example.com/gpu", IgnoredByScheduler: true}}
				return e
			}(),
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := extenderConfigs(f.r, "gpu", []schedulingv1alpha1.Extender{tt.in})
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to start with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]configv1.Extender{tt.want}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestExtenderSecretsTellNothing: whatever keeps a Secret from serving a
// profile, the profile's author reads the same error, so that profiles
// cannot probe which Secrets the operator's namespace holds, how they are
// labelled or which keys they have.
func TestExtenderSecretsTellNothing(t *testing.T) {
	secret := func(labels map[string]string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: revisionNS, Name: "ca", Labels: labels}, Data: data}
	}
	ca := map[string][]byte{"ca.crt": []byte("ca")}
	const want = "extenders[0].tlsConfig.caSecretRef: no Secret ca in namespace profile-scheduler-system is labelled scheduling.schedprofiles.io/extender-tls=gpu and holds ca.crt; create Secret profile-scheduler-system/ca with that label and key ca.crt, and the profile is built again"
	for _, tt := range []struct {
		name   string
		secret *corev1.Secret
	}{
		{name: "missing"},
		{name: "unlabelled", secret: secret(nil, ca)},
		{name: "labelled for another profile", secret: secret(map[string]string{schedulingv1alpha1.ExtenderTLSLabel: "other"}, ca)},
		{name: "without the key", secret: secret(map[string]string{schedulingv1alpha1.ExtenderTLSLabel: "gpu"}, map[string][]byte{"tls.key": []byte("k")})},
		{name: "with the key empty", secret: secret(map[string]string{schedulingv1alpha1.ExtenderTLSLabel: "gpu"}, map[string][]byte{"ca.crt": nil})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var objs []client.Object
			if tt.secret != nil {
				objs = append(objs, tt.secret)
			}
			f := newProfileFixture(t, nil, objs...)
			_, err := extenderConfigs(f.r, "gpu", []schedulingv1alpha1.Extender{{URLPrefix: "https://e", FilterVerb: "filter", EnableHTTPS: true,
				TLSConfig: &schedulingv1alpha1.ExtenderTLSConfig{CASecretRef: &schedulingv1alpha1.SecretKeyReference{Name: "ca"}}}})
			if err == nil || err.Error() != want {
				t.Errorf("err = %v, want %q", err, want)
			}
		})
	}
}

func TestRefusedExtenderReplyIsReportedInStatus(t *testing.T) {
	sp := newProfile("p", "", 0, 10)
	sp.Spec.Extenders = []schedulingv1alpha1.Extender{{URLPrefix: "http://gpu.example", PreemptVerb: "preempt", Ignorable: true}}
	f := newProfileFixture(t, nil, sp)
	f.reconcile(t, "p")
	f.events()
	f.r.extenderObserver("p", 1)("http://gpu.example", &extender.ReplyError{URL: "http://gpu.example/preempt", Reason: `it names node "elsewhere", which was not a candidate`})
	f.reconcile(t, "p")
	want := `Replies of extenders of generation 1 were refused, and calls fail: http://gpu.example: refused the reply of the extender at URL http://gpu.example/preempt: it names node "elsewhere", which was not a candidate`
	c := meta.FindStatusCondition(f.get(t, "p").Status.Conditions, schedulingv1alpha1.ProfileExtendersReachable)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != schedulingv1alpha1.ReasonExtenderReplyRefused || c.Message != want {
		t.Fatalf("ExtendersReachable = %+v", c)
	}
	if evs := f.events(); len(evs) != 1 || evs[0] != "Warning ExtenderReplyRefused "+want {
		t.Errorf("events %q", evs)
	}
}

func TestRefusedExtenderTLSIsReportedInStatus(t *testing.T) {
	sp := newProfile("p", "", 0, 10)
	sp.Spec.Extenders = []schedulingv1alpha1.Extender{{URLPrefix: "https://e", FilterVerb: "filter",
		TLSConfig: &schedulingv1alpha1.ExtenderTLSConfig{CertFile: "/etc/cert.pem"}}}
	f := newProfileFixture(t, nil, sp)
	f.reconcile(t, "p")
	cond := meta.FindStatusCondition(f.get(t, "p").Status.Conditions, schedulingv1alpha1.ProfileAccepted)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != schedulingv1alpha1.ReasonInvalidSpec ||
		!strings.HasPrefix(cond.Message, "Generation 1 cannot be built: extenders[0].tlsConfig.certFile: not supported") {
		t.Errorf("Accepted = %+v", cond)
	}
	// Built to find what else is wrong, and closed.
	for i, b := range f.built {
		if b.closed != 1 {
			t.Errorf("instance %d built from a refused spec closed %d times, want once", i, b.closed)
		}
	}
}

func TestUnreachableExtenderIsReportedInStatus(t *testing.T) {
	sp := newProfile("p", "", 0, 10)
	sp.Spec.Extenders = []schedulingv1alpha1.Extender{{URLPrefix: "http://gpu.example", FilterVerb: "filter"}}
	f := newProfileFixture(t, nil, sp)
	f.reconcile(t, "p")
	reachable := func() *metav1.Condition {
		t.Helper()
		return meta.FindStatusCondition(f.get(t, "p").Status.Conditions, schedulingv1alpha1.ProfileExtendersReachable)
	}
	if c := reachable(); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("ExtendersReachable = %+v, want True", c)
	}
	f.events()

	observe := f.r.extenderObserver("p", 1)
	observe("http://gpu.example", errors.New(`Post "http://gpu.example/filter": dial tcp: connection refused`))
	select {
	case ev := <-f.r.wake:
		if ev.Object.GetName() != "p" {
			t.Fatalf("woke %q", ev.Object.GetName())
		}
	default:
		t.Fatal("the profile was not queued for a reconcile")
	}
	f.reconcile(t, "p")
	want := `Calls to extenders of generation 1 fail; pods they see cannot be scheduled: http://gpu.example: Post "http://gpu.example/filter": dial tcp: connection refused`
	if c := reachable(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != schedulingv1alpha1.ReasonExtenderUnreachable || c.Message != want {
		t.Fatalf("ExtendersReachable = %+v", c)
	}
	if evs := f.events(); len(evs) != 1 || evs[0] != "Warning ExtenderUnreachable "+want {
		t.Errorf("events %q", evs)
	}
	// Accepted and Active are untouched: the spec is valid and serves.
	if !meta.IsStatusConditionTrue(f.get(t, "p").Status.Conditions, schedulingv1alpha1.ProfileActive) {
		t.Error("Active is not True")
	}

	// An older generation's instance finishing its cycles does not count.
	f.r.extenderObserver("p", 0)("http://gpu.example", nil)
	f.reconcile(t, "p")
	if c := reachable(); c.Status != metav1.ConditionFalse {
		t.Errorf("a stale generation's success cleared the failure")
	}

	observe("http://gpu.example", nil)
	f.reconcile(t, "p")
	if c := reachable(); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("ExtendersReachable = %+v, want True again", c)
	}
}

// extenderConfigs plans extenders for the profile named profile and reads
// their Secrets as the reconciler does when it compiles the spec.
func extenderConfigs(r *SchedulingProfileReconciler, profile string, exts []schedulingv1alpha1.Extender) ([]configv1.Extender, error) {
	sp := &schedulingv1alpha1.SchedulingProfile{ObjectMeta: metav1.ObjectMeta{Name: profile}, Spec: schedulingv1alpha1.SchedulingProfileSpec{Extenders: exts}}
	plan, refusals := testPlanner(nil).Plan(sp)
	if len(refusals) == 0 {
		var got []configv1.Extender
		got, refusals = plan.ResolveExtenders(context.Background(), r.secretReader(profile, nil))
		if len(refusals) == 0 {
			return got, nil
		}
	}
	return nil, errors.New(refusals[0].Detail)
}

// selfSignedPEM is a self-signed certificate and its key, PEM-encoded.
func selfSignedPEM(t *testing.T) (cert, key []byte) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "extender"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
