package extender

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	configv1 "k8s.io/kube-scheduler/config/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

func TestPolicyURLs(t *testing.T) {
	allowed := []string{"https://gpu.kube-system.svc:8443/scheduler", "http://127.0.0.1:*", "https://svc/x"}
	const refused = "is not under a URL prefix the operator allows (--allowed-extender-url-prefixes=https://gpu.kube-system.svc:8443/scheduler,http://127.0.0.1:*,https://svc/x)"
	for _, tt := range []struct {
		name      string
		allowed   []string
		urlPrefix string
		verb      string
		want      string
	}{
		{name: "the prefix itself", urlPrefix: "https://gpu.kube-system.svc:8443/scheduler"},
		{name: "with a trailing slash", urlPrefix: "https://gpu.kube-system.svc:8443/scheduler/"},
		{name: "a path below it", urlPrefix: "https://gpu.kube-system.svc:8443/scheduler/v2"},
		{name: "scheme and host in capitals", urlPrefix: "HTTPS://GPU.kube-system.svc:8443/scheduler"},
		{name: "any port of a host allowed with every port", urlPrefix: "http://127.0.0.1:31000/x"},
		{name: "the default port of a host allowed without one", urlPrefix: "https://svc/x"},
		{name: "the default port named", urlPrefix: "https://svc:443/x"},
		{name: "another port of a host allowed without one", urlPrefix: "https://svc:10250/x", want: refused},
		{name: "a semicolon climbing out", urlPrefix: "https://gpu.kube-system.svc:8443/scheduler/..;/admin", want: refused},
		{name: "a backslash climbing out, escaped", urlPrefix: "https://gpu.kube-system.svc:8443/scheduler/..%5cadmin", want: refused},
		{name: "a sibling path", urlPrefix: "https://gpu.kube-system.svc:8443/scheduler-admin",
			want: "extenders[0].urlPrefix: Forbidden: https://gpu.kube-system.svc:8443/scheduler-admin " + refused},
		{name: "another port", urlPrefix: "https://gpu.kube-system.svc:10250/scheduler", want: refused},
		{name: "another scheme", urlPrefix: "http://gpu.kube-system.svc:8443/scheduler", want: refused},
		{name: "a host that only starts the same", urlPrefix: "https://gpu.kube-system.svc.evil.example:8443/scheduler", want: refused},
		{name: "the allowed host as credentials of another", urlPrefix: "https://gpu.kube-system.svc:8443@evil.example/scheduler", want: refused},
		{name: "a verb climbing out of the path", urlPrefix: "https://gpu.kube-system.svc:8443/scheduler", verb: "../admin",
			want: "extenders[0].urlPrefix: Forbidden: https://gpu.kube-system.svc:8443/scheduler/../admin " + refused},
		{name: "a verb climbing out, escaped", urlPrefix: "https://gpu.kube-system.svc:8443/scheduler", verb: "%2e%2e/admin", want: refused},
		{name: "nothing allowed", allowed: []string{}, urlPrefix: "http://127.0.0.1:8888",
			want: "extenders[0].urlPrefix: Forbidden: the operator allows no extenders; a cluster admin allows them by URL prefix with the operator's --allowed-extender-url-prefixes flag"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prefixes := allowed
			if tt.allowed != nil {
				prefixes = tt.allowed
			}
			policy, err := NewPolicy(prefixes, 0)
			if err != nil {
				t.Fatal(err)
			}
			verb := tt.verb
			if verb == "" {
				verb = "filter"
			}
			_, err = New([]configv1.Extender{{URLPrefix: tt.urlPrefix, FilterVerb: verb}}, policy, nil)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestNewPolicy(t *testing.T) {
	for _, tt := range []struct {
		name     string
		prefixes []string
		maxReply int64
		want     string
	}{
		{name: "no scheme", prefixes: []string{"gpu.svc:8443"}, want: `allowed extender URL prefix "gpu.svc:8443": must start with http:// or https://`},
		{name: "no host", prefixes: []string{"http://"}, want: `allowed extender URL prefix "http://": must name a host`},
		{name: "credentials", prefixes: []string{"http://u:p@gpu.svc"}, want: `allowed extender URL prefix "http://u:p@gpu.svc": must not carry credentials`},
		{name: "a query", prefixes: []string{"http://gpu.svc/?a=b"}, want: `allowed extender URL prefix "http://gpu.svc/?a=b": must not have a query or a fragment`},
		{name: "dot segments", prefixes: []string{"http://gpu.svc/a/../b"}, want: `allowed extender URL prefix "http://gpu.svc/a/../b": must not have "." or ".." path segments`},
		{name: "a semicolon", prefixes: []string{"http://gpu.svc/a;b"}, want: `allowed extender URL prefix "http://gpu.svc/a;b": must not have ";" or "\" in its path`},
		{name: "a port and every port", prefixes: []string{"http://gpu.svc:80:*"}, want: `allowed extender URL prefix "http://gpu.svc:80:*": must not name a port and every port`},
		{name: "a negative reply size", maxReply: -1, want: "the largest extender reply must be between 0 and 67108864 bytes, got -1"},
		{name: "a reply size above the cap", maxReply: MaxReplyBytesCap + 1, want: "the largest extender reply must be between 0 and 67108864 bytes, got 67108865"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPolicy(tt.prefixes, tt.maxReply)
			if err == nil || err.Error() != tt.want {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
	var zero Policy
	if len(zero.AllowedURLPrefixes()) != 0 {
		t.Errorf("the zero policy allows %v, want nothing", zero.AllowedURLPrefixes())
	}
}

// TestRedirects: a redirect is followed, as upstream, only to a URL the
// policy allows.
func TestRedirects(t *testing.T) {
	var elsewhereCalls atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhereCalls.Add(1)
		_ = json.NewEncoder(w).Encode(extenderv1.ExtenderBindingResult{})
	}))
	t.Cleanup(elsewhere.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ext/moved":
			http.Redirect(w, r, "/ext/bind", http.StatusTemporaryRedirect)
		case "/ext/away":
			http.Redirect(w, r, elsewhere.URL+"/bind", http.StatusTemporaryRedirect)
		default:
			_ = json.NewEncoder(w).Encode(extenderv1.ExtenderBindingResult{})
		}
	}))
	t.Cleanup(srv.Close)
	policy, err := NewPolicy([]string{srv.URL + "/ext"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for verb, wantErr := range map[string]string{
		"moved": "",
		"away":  "redirected to " + elsewhere.URL + "/bind, which is not under a URL prefix the operator allows",
	} {
		exts, err := New([]configv1.Extender{{URLPrefix: srv.URL + "/ext", BindVerb: verb}}, policy, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = exts[0].Bind(t.Context(), testPod(), "n")
		if (wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), wantErr) {
			t.Errorf("bind at %s: err = %v, want %q", verb, err, wantErr)
		}
	}
	if n := elsewhereCalls.Load(); n != 0 {
		t.Errorf("the server outside the allowed prefixes got %d calls", n)
	}
}
