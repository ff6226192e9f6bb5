package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Extender is an upstream scheduler extender (kubescheduler.config.k8s.io/v1
// Extender), field for field and with the same JSON names, so an extender
// block pasted from a kube-scheduler configuration file is accepted. Only
// tlsConfig differs: a cluster-scoped object must not carry private keys,
// so TLS material comes from Secrets in the operator's namespace.
type Extender struct {
	// URLPrefix at which the extender is available.
	// +kubebuilder:validation:MinLength=1
	URLPrefix string `json:"urlPrefix"`
	// FilterVerb is appended to urlPrefix for the filter call; empty if not supported.
	// +optional
	FilterVerb string `json:"filterVerb,omitempty"`
	// PreemptVerb is appended to urlPrefix for the preempt call; empty if not supported.
	// +optional
	PreemptVerb string `json:"preemptVerb,omitempty"`
	// PrioritizeVerb is appended to urlPrefix for the prioritize call; empty if not supported.
	// +optional
	PrioritizeVerb string `json:"prioritizeVerb,omitempty"`
	// Weight multiplies the node scores the prioritize call returns; it must
	// be positive when prioritizeVerb is set.
	// +optional
	Weight int64 `json:"weight,omitempty"`
	// BindVerb is appended to urlPrefix for the bind call; empty if not
	// supported. An extender that binds must write the binding to the API
	// server itself. At most one extender of a profile may bind.
	// +optional
	BindVerb string `json:"bindVerb,omitempty"`
	// EnableHTTPS says whether to talk to the extender over HTTPS.
	// +optional
	EnableHTTPS bool `json:"enableHTTPS,omitempty"`
	// TLSConfig is the TLS configuration of the connection.
	// +optional
	TLSConfig *ExtenderTLSConfig `json:"tlsConfig,omitempty"`
	// HTTPTimeout bounds each call to the extender; 0 or unset means 5s, as
	// upstream. At most 10s, and a profile's extenders together may take at
	// most 40s in one scheduling cycle (filter calls counted twice, preempt
	// calls, the longest prioritize call). A filter timeout fails the pod's
	// scheduling attempt unless the extender is ignorable; a prioritize
	// timeout only drops its scores.
	// +optional
	HTTPTimeout metav1.Duration `json:"httpTimeout,omitempty"`
	// NodeCacheCapable says the extender caches nodes itself, so only node
	// names are sent to it.
	// +optional
	NodeCacheCapable bool `json:"nodeCacheCapable,omitempty"`
	// ManagedResources are the extended resources this extender manages: it
	// sees only pods that request at least one of them. Empty means it sees
	// every pod.
	// +optional
	// +listType=atomic
	ManagedResources []ExtenderManagedResource `json:"managedResources,omitempty"`
	// Ignorable extenders are skipped when they fail or cannot be reached,
	// instead of failing the pod's scheduling attempt.
	// +optional
	Ignorable bool `json:"ignorable,omitempty"`
}

// ExtenderManagedResource is an extended resource an extender manages.
type ExtenderManagedResource struct {
	// Name is the extended resource name.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// IgnoredByScheduler asks NodeResourcesFit not to check this resource.
	// Accepted so that upstream blocks paste, but NodeResourcesFit still
	// checks the resource: a profile that sets it is refused.
	// +optional
	IgnoredByScheduler bool `json:"ignoredByScheduler,omitempty"`
}

// ExtenderTLSConfig is upstream's ExtenderTLSConfig with the key material
// moved to Secrets. The upstream file and inline data fields are accepted
// in the schema only so that a pasted block is refused with a clear reason
// rather than silently pruned: a file path names the operator's own
// filesystem, and inline data would publish a private key in a
// cluster-scoped object anyone who can read profiles can see.
type ExtenderTLSConfig struct {
	// Insecure skips verifying the extender's certificate. For testing only.
	// +optional
	Insecure bool `json:"insecure,omitempty"`
	// ServerName is sent for SNI and checked against the extender's
	// certificate; empty means the host of urlPrefix.
	// +optional
	ServerName string `json:"serverName,omitempty"`
	// CertSecretRef names a kubernetes.io/tls Secret in the operator's
	// namespace whose tls.crt and tls.key are the client certificate and
	// key presented to the extender. The Secret must carry the label
	// scheduling.schedprofiles.io/extender-tls with this profile's name as
	// value.
	// +optional
	CertSecretRef *LocalSecretReference `json:"certSecretRef,omitempty"`
	// CASecretRef names a Secret in the operator's namespace holding the
	// PEM bundle of CAs trusted to sign the extender's certificate, under
	// key (ca.crt when unset). The Secret must carry the label
	// scheduling.schedprofiles.io/extender-tls with this profile's name as
	// value.
	// +optional
	CASecretRef *SecretKeyReference `json:"caSecretRef,omitempty"`

	// CertFile is not supported: use certSecretRef.
	// +optional
	CertFile string `json:"certFile,omitempty"`
	// KeyFile is not supported: use certSecretRef.
	// +optional
	KeyFile string `json:"keyFile,omitempty"`
	// CAFile is not supported: use caSecretRef.
	// +optional
	CAFile string `json:"caFile,omitempty"`
	// CertData is not supported: use certSecretRef.
	// +optional
	CertData []byte `json:"certData,omitempty"`
	// KeyData is not supported: use certSecretRef.
	// +optional
	KeyData []byte `json:"keyData,omitempty"`
	// CAData is not supported: use caSecretRef.
	// +optional
	CAData []byte `json:"caData,omitempty"`
}

// LocalSecretReference names a Secret in the operator's namespace.
type LocalSecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// SecretKeyReference names one key of a Secret in the operator's namespace.
type SecretKeyReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key in the Secret's data; ca.crt when unset.
	// +optional
	Key string `json:"key,omitempty"`
}

// ExtenderTLSLabel marks a Secret of the operator's namespace as TLS
// material of the extenders of one SchedulingProfile: its value is the
// profile's name. A profile can use no other Secret, so that whoever may
// write profiles cannot make the operator read the rest of its namespace.
const ExtenderTLSLabel = "scheduling.schedprofiles.io/extender-tls"

// Condition type and reasons of a profile's extenders.
const (
	// ProfileExtendersReachable is set on a profile whose serving instance
	// has extenders: False while calls to one of its non-ignorable
	// extenders fail (it cannot be reached, times out or answers with an
	// HTTP error), or while the last reply of any of its extenders was
	// refused, True otherwise.
	ProfileExtendersReachable = "ExtendersReachable"

	// ReasonExtendersReachable: the last call to every non-ignorable
	// extender succeeded, or none was called yet.
	ReasonExtendersReachable = "Reachable"
	// ReasonExtenderUnreachable: the last call to a non-ignorable extender
	// failed; the message names it and says how.
	ReasonExtenderUnreachable = "ExtenderUnreachable"
	// ReasonExtenderReplyRefused: the operator refused the last reply of
	// an extender, ignorable or not, because it was larger than allowed or
	// reached beyond what the extender was sent (a preempt reply naming a
	// node that was not a candidate, or a pod not proposed as a victim);
	// the message names the extender and what was refused.
	ReasonExtenderReplyRefused = "ExtenderReplyRefused"
)
