package extender

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	configv1 "k8s.io/kube-scheduler/config/v1"
)

// AllowedURLPrefixesFlag is the operator flag that sets
// Policy.AllowedURLPrefixes; messages name it so that whoever reads a
// refusal learns who can lift it.
const AllowedURLPrefixesFlag = "--allowed-extender-url-prefixes"

// DefaultMaxReplyBytes is how many bytes a reply may have beyond the size
// of the request it answers, unless the policy says otherwise.
// MaxReplyBytesCap bounds a reply whatever its request: a request grows
// with the nodes sent, and the reply is held whole while it is decoded.
const (
	DefaultMaxReplyBytes = 4 << 20
	MaxReplyBytesCap     = 64 << 20
)

// MaxHTTPTimeout bounds an extender's httpTimeout, and MaxCycleTime what
// a profile's extenders may take together in one scheduling cycle: the
// filter calls one after the other, twice for a pod with a nominated node
// (tried alone first, as upstream), the preempt calls one after the
// other, and the longest of the concurrent prioritize calls. One extender
// with every verb at MaxHTTPTimeout fits. Both stay well below the
// scheduling loop's stalled-cycle timeout (two minutes), after which the
// liveness check restarts the operator: one slow extender must not
// restart the leader, and then the standby that calls it next.
const (
	MaxHTTPTimeout = 10 * time.Second
	MaxCycleTime   = 40 * time.Second
)

// Policy is what the cluster admin, through the operator's flags, lets
// any profile's extenders do. The zero Policy allows no extender at all.
type Policy struct {
	allowed       []allowedPrefix
	maxReplyBytes int64
}

// allowedPrefix is a parsed prefix; anyPort is its ":*" form.
type allowedPrefix struct {
	*url.URL
	anyPort bool
}

// anyPortSuffix ends the host of a prefix that allows every port.
const anyPortSuffix = ":*"

// NewPolicy allows extenders at the given URL prefixes (empty ones are
// skipped), with replies of at most maxReplyBytes beyond their request (0
// means DefaultMaxReplyBytes). A prefix is an absolute http or https URL: a
// call's URL must have its scheme and host, its port (the scheme's default
// port when it names none, every port when it ends its host with ":*"),
// and a path under its path at a "/". An admin who writes https://svc
// means the service's HTTPS port, not whatever else listens on the host.
func NewPolicy(allowedURLPrefixes []string, maxReplyBytes int64) (Policy, error) {
	if maxReplyBytes < 0 || maxReplyBytes > MaxReplyBytesCap {
		return Policy{}, fmt.Errorf("the largest extender reply must be between 0 and %d bytes, got %d", MaxReplyBytesCap, maxReplyBytes)
	}
	if maxReplyBytes == 0 {
		maxReplyBytes = DefaultMaxReplyBytes
	}
	p := Policy{maxReplyBytes: maxReplyBytes}
	for _, s := range allowedURLPrefixes {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		raw, anyPort := cutAnyPort(s)
		u, err := url.Parse(raw)
		if err == nil {
			err = checkPrefix(u, anyPort)
		}
		if err != nil {
			return Policy{}, fmt.Errorf("allowed extender URL prefix %q: %w", s, err)
		}
		u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
		u.Path = strings.TrimSuffix(u.Path, "/")
		p.allowed = append(p.allowed, allowedPrefix{URL: u, anyPort: anyPort})
	}
	return p, nil
}

// cutAnyPort removes ":*" from the end of the host of the URL s.
func cutAnyPort(s string) (string, bool) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s, false
	}
	host, path, _ := strings.Cut(rest, "/")
	if h, found := strings.CutSuffix(host, anyPortSuffix); found {
		if path != "" || strings.HasSuffix(rest, "/") {
			h += "/" + path
		}
		return scheme + "://" + h, true
	}
	return s, false
}

func checkPrefix(u *url.URL, anyPort bool) error {
	switch {
	case anyPort && u.Port() != "":
		return errors.New("must not name a port and every port")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("must start with http:// or https://")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("must name a host")
	case u.User != nil:
		return errors.New("must not carry credentials")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return errors.New("must not have a query or a fragment")
	case hasDotSegment(u.Path):
		return errors.New(`must not have "." or ".." path segments`)
	case strings.ContainsAny(u.Path, pathRefused):
		return errors.New(`must not have ";" or "\" in its path`)
	}
	return nil
}

// pathRefused are characters some servers and proxies read as path
// separators or parameters (/scheduler/..;/admin, ..%5c): a path holding
// them could leave the prefix's path once such a server cleans it.
const pathRefused = ";\\"

// AllowsAny reports whether the policy allows any extender.
func (p Policy) AllowsAny() bool { return len(p.allowed) > 0 }

// AllowedURLPrefixes returns the prefixes the policy allows, for messages.
func (p Policy) AllowedURLPrefixes() []string {
	out := make([]string, len(p.allowed))
	for i, a := range p.allowed {
		out[i] = a.String()
		if a.anyPort {
			u := *a.URL
			u.Host += anyPortSuffix
			// Not url.String, which would escape the "*".
			out[i] = u.Scheme + "://" + u.Host + u.EscapedPath()
		}
	}
	return out
}

// allows reports whether a call to raw is allowed.
func (p Policy) allows(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || hasDotSegment(u.Path) || strings.ContainsAny(u.Path, pathRefused) {
		// Credentials could hide the host from a reader; dot segments
		// could leave the prefix's path once a server cleans them.
		return false
	}
	for _, a := range p.allowed {
		if a.Scheme != strings.ToLower(u.Scheme) || !sameHost(a, u) {
			continue
		}
		if a.Path == "" || u.Path == a.Path || strings.HasPrefix(u.Path, a.Path+"/") {
			return true
		}
	}
	return false
}

// sameHost: the allowed host, at its port (every port for the ":*" form).
func sameHost(allowed allowedPrefix, u *url.URL) bool {
	if allowed.Hostname() != strings.ToLower(u.Hostname()) {
		return false
	}
	return allowed.anyPort || port(allowed.URL) == port(u)
}

// port is u's port, or its scheme's default.
func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

func hasDotSegment(path string) bool {
	for seg := range strings.SplitSeq(path, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// validate refuses extenders the policy does not allow: every URL the
// operator would call (urlPrefix and urlPrefix/verb for each verb) must be
// under an allowed prefix.
func (p Policy) validate(path *field.Path, cfgs []configv1.Extender) field.ErrorList {
	var errs field.ErrorList
	for i := range cfgs {
		e := &cfgs[i]
		if e.URLPrefix == "" {
			continue
		}
		fp := path.Index(i).Child("urlPrefix")
		if len(p.allowed) == 0 {
			errs = append(errs, field.Forbidden(fp, fmt.Sprintf(
				"the operator allows no extenders; a cluster admin allows them by URL prefix with the operator's %s flag", AllowedURLPrefixesFlag)))
			continue
		}
		for _, u := range append([]string{e.URLPrefix}, callURLs(e)...) {
			if !p.allows(u) {
				errs = append(errs, field.Forbidden(fp, fmt.Sprintf("%s is not under a URL prefix the operator allows (%s=%s)",
					clip(u), AllowedURLPrefixesFlag, strings.Join(p.AllowedURLPrefixes(), ","))))
				break
			}
		}
	}
	return errs
}

// callURLs are the URLs the extender's verbs are called at.
func callURLs(e *configv1.Extender) []string {
	var out []string
	for _, verb := range []string{e.FilterVerb, e.PreemptVerb, e.PrioritizeVerb, e.BindVerb} {
		if verb != "" {
			out = append(out, callURL(e.URLPrefix, verb))
		}
	}
	return out
}

// callURL is upstream's: urlPrefix without trailing slashes, "/", verb.
func callURL(prefix, verb string) string {
	return strings.TrimRight(prefix, "/") + "/" + verb
}

// validateTimeouts bounds each httpTimeout by MaxHTTPTimeout and what the
// extenders may take in one scheduling cycle by MaxCycleTime.
func validateTimeouts(path *field.Path, cfgs []configv1.Extender) field.ErrorList {
	var errs field.ErrorList
	var sequential, longestPrioritize time.Duration
	for i := range cfgs {
		e := &cfgs[i]
		d := e.HTTPTimeout.Duration
		if d > MaxHTTPTimeout {
			errs = append(errs, field.Invalid(path.Index(i).Child("httpTimeout"), d.String(), fmt.Sprintf(
				"must be at most %v: the scheduling loop waits for filter and preempt calls, and a longer wait would hold up every profile", MaxHTTPTimeout)))
			continue
		}
		if d <= 0 {
			d = DefaultTimeout
		}
		if e.FilterVerb != "" {
			sequential += 2 * d
		}
		if e.PreemptVerb != "" {
			sequential += d
		}
		if e.PrioritizeVerb != "" {
			longestPrioritize = max(longestPrioritize, d)
		}
	}
	if total := sequential + longestPrioritize; len(errs) == 0 && total > MaxCycleTime {
		errs = append(errs, field.Invalid(path, total.String(), fmt.Sprintf(
			"the extenders' filter calls (twice for a pod with a nominated node) and preempt calls, one after the other, and their longest prioritize call may take this long in one scheduling cycle, more than %v; lower httpTimeout or use fewer extenders", MaxCycleTime)))
	}
	return errs
}

// LoopbackURLPrefixes are the prefixes of extenders on the operator's own
// host, at any port: what a local run and tests allow.
func LoopbackURLPrefixes() []string {
	return []string{"http://127.0.0.1:*", "https://127.0.0.1:*", "http://[::1]:*", "https://[::1]:*", "http://localhost:*", "https://localhost:*"}
}
