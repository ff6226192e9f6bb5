package testenv

import (
	"fmt"
	"os"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	"github.com/schedprofiles/profile-scheduler/internal/localcluster"
)

// WebhookConfiguration is the ValidatingWebhookConfiguration `make
// manifests` generates into config/webhook, before kustomize names it.
func WebhookConfiguration() (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	data, err := os.ReadFile(filepath.Join(RepoRoot(), "config", "webhook", "manifests.yaml"))
	if err != nil {
		return nil, err
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(data, vwc); err != nil {
		return nil, fmt.Errorf("config/webhook/manifests.yaml: %w", err)
	}
	return vwc, nil
}

// InstallWebhook makes env install the project's webhook configuration
// when it starts, as config/webhook has it but calling a server on
// loopback with a CA envtest generates (WebhookServer serves it). With a
// selector, only the objects whose labels it selects go through the
// webhook: a suite that also drives invalid profiles to their status
// labels the ones its webhook tests apply.
func InstallWebhook(env *envtest.Environment, selector *metav1.LabelSelector) error {
	vwc, err := WebhookConfiguration()
	if err != nil {
		return err
	}
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ObjectSelector = selector
	}
	env.WebhookInstallOptions.ValidatingWebhooks = []*admissionregistrationv1.ValidatingWebhookConfiguration{vwc}
	return nil
}

// WebhookServer serves at the address and with the certificate env
// installed the webhook for.
func WebhookServer(env *envtest.Environment) ctrlwebhook.Server {
	return localcluster.WebhookServer(&env.WebhookInstallOptions)
}
