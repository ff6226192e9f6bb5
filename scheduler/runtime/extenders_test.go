package runtime

import (
	"errors"
	"strings"
	"testing"

	configv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/schedprofiles/profile-scheduler/scheduler/extender"
)

func TestWithExtenders(t *testing.T) {
	cfgs := []configv1.Extender{
		{URLPrefix: "http://127.0.0.1:1/a", FilterVerb: "filter"},
		{URLPrefix: "http://127.0.0.1:1/b", PrioritizeVerb: "prioritize", Weight: 2},
	}
	policy, err := extender.NewPolicy(extender.LoopbackURLPrefixes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	fw, err := newTestFramework(t.Context(), baseRegistry(nil), nil, WithExtenders(cfgs), WithExtenderPolicy(policy))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fw.Close() }()
	exts := fw.Extenders()
	if len(exts) != 2 || exts[0].Name() != cfgs[0].URLPrefix || exts[1].Name() != cfgs[1].URLPrefix {
		t.Fatalf("Extenders = %v, want the profile's, in order", exts)
	}
	// Extenders register no events: the pseudo plugin they reject under
	// is requeued by every event, as upstream.
	found := false
	for _, e := range fw.EnqueueExtensions() {
		if e.Name() == extender.Name {
			events, _ := e.EventsToRegister(t.Context())
			found = len(events) > 0
		}
	}
	if !found {
		t.Errorf("no enqueue extension for %q", extender.Name)
	}

	plain, err := newTestFramework(t.Context(), baseRegistry(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = plain.Close() }()
	if len(plain.Extenders()) != 0 {
		t.Errorf("an instance without extenders has %v", plain.Extenders())
	}
}

func TestWithInvalidExtenders(t *testing.T) {
	policy, err := extender.NewPolicy([]string{"http://e", "http://f"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = newTestFramework(t.Context(), baseRegistry(nil), nil, WithExtenderPolicy(policy), WithExtenders([]configv1.Extender{
		{URLPrefix: "http://e", BindVerb: "bind"}, {URLPrefix: "http://f", BindVerb: "bind"},
	}))
	var cfgErr *ConfigError
	if !errors.As(err, &cfgErr) || !strings.Contains(err.Error(), "only one extender can implement bind") {
		t.Fatalf("err = %v, want a ConfigError with upstream's reason", err)
	}
	if want := `Extenders: extenders: Invalid value: "found 2 extenders implementing bind": only one extender can implement bind`; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
}

func TestExtendersWithoutPolicy(t *testing.T) {
	_, err := newTestFramework(t.Context(), baseRegistry(nil), nil, WithExtenders([]configv1.Extender{{URLPrefix: "http://127.0.0.1:1", FilterVerb: "filter"}}))
	want := "Extenders: extenders[0].urlPrefix: Forbidden: the operator allows no extenders; a cluster admin allows them by URL prefix with the operator's --allowed-extender-url-prefixes flag"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}
