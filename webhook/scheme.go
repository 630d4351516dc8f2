package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Scheme names how a supplier signs its webhooks: which headers it sends, what it signs and how
// the secret becomes the HMAC key. A provider's `webhook.signature` setting is one of these
// names; the zero Scheme is not valid (use ParseScheme, or one of the constants).
type Scheme string

const (
	// SchemeActledger is actledger's own v1 scheme: Webhook-Signature: t=<unix>,v1=<hex HMAC-SHA256
	// of "<t>.<body>">, the secret used as given. It is what the mock supplier sends, and the
	// scheme of a provider that names none.
	SchemeActledger Scheme = "actledger"
	// SchemeStripe is Stripe's scheme: Stripe-Signature in the same t=…,v1=… form, the whsec_…
	// secret used as given (see stripe.go).
	SchemeStripe Scheme = "stripe"
	// SchemeGitHub is GitHub's scheme: X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>.
	// It carries no timestamp, so nothing here stops a replay: the caller must, by event id (see
	// github.go).
	SchemeGitHub Scheme = "github"
	// SchemeStandard is the Standard Webhooks scheme: webhook-id, webhook-timestamp and
	// webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">, the key being the
	// base64-decoded part of a whsec_<base64> secret (see standard.go).
	SchemeStandard Scheme = "standard"
)

// schemes is every valid Scheme, in the order they are listed to a person.
var schemes = []Scheme{SchemeActledger, SchemeStripe, SchemeGitHub, SchemeStandard, SchemeHMAC}

// Schemes returns every valid Scheme, for documentation and error messages.
func Schemes() []Scheme {
	return append([]Scheme(nil), schemes...)
}

// ParseScheme returns the Scheme named s, exactly as written in a providers file ("actledger",
// "stripe", "github", "standard", "hmac"). Any other text, the empty string included, is an error that
// lists the valid names: defaulting a missing setting is the caller's decision.
func ParseScheme(s string) (Scheme, error) {
	for _, scheme := range schemes {
		if s == string(scheme) {
			return scheme, nil
		}
	}
	names := make([]string, len(schemes))
	for i, scheme := range schemes {
		names[i] = string(scheme)
	}
	return "", fmt.Errorf("unknown webhook signature scheme %q (valid: %s)", s, strings.Join(names, ", "))
}

// UnmarshalText makes a Scheme decodable straight from a configuration file, with ParseScheme's
// rule.
func (s *Scheme) UnmarshalText(text []byte) error {
	parsed, err := ParseScheme(string(text))
	if err != nil {
		return err
	}
	*s = parsed
	return nil
}

// String returns the scheme's name.
func (s Scheme) String() string { return string(s) }

// Headers returns the names of the HTTP headers the scheme reads, in the order VerifyRequest
// checks them, spelled as the supplier documents them (http.Header lookups ignore case). A
// caller names them when it tells a supplier what was wrong; nil for an invalid Scheme and for
// SchemeHMAC, whose headers are its HMAC block's (HMAC.Headers).
func (s Scheme) Headers() []string {
	switch s {
	case SchemeActledger:
		return []string{Header}
	case SchemeStripe:
		return []string{StripeHeader}
	case SchemeGitHub:
		return []string{GitHubHeader}
	case SchemeStandard:
		return []string{StandardIDHeader, StandardTimestampHeader, StandardSignatureHeader}
	default:
		return nil
	}
}

// CheckSecret reports whether secret can verify anything under the scheme, so that a bad secret
// stops start instead of refusing every webhook later. Every scheme needs a non-empty secret;
// SchemeStandard needs whsec_<base64> (the prefix may be left out) that decodes to at least one
// byte. The error never contains the secret.
func (s Scheme) CheckSecret(secret []byte) error {
	if err := checkScheme(s); err != nil {
		return err
	}
	if len(secret) == 0 {
		return fmt.Errorf("%w: the secret is empty", ErrNoSecret)
	}
	if s == SchemeStandard {
		_, err := standardKey(secret)
		return err
	}
	return nil
}

// VerifyRequest checks a webhook's headers h and raw body against any of secrets at time now,
// the way scheme prescribes. It returns nil only if some signature in the headers is the HMAC the
// scheme defines under some usable secret and, for the schemes that carry a timestamp (all but
// SchemeGitHub), that timestamp is within tolerance of now (tolerance <= 0 means
// DefaultTolerance).
//
// Errors match exactly one of the sentinels: ErrNoSecret (checked first: no usable secret is
// configured), ErrMalformed (a header the scheme reads is missing — then also ErrMissing and
// *MissingHeaderError — repeated, too long or not of the scheme's form), ErrMismatch (no
// signature matches), ErrStale (authentic, but signed too long ago or in the future: the
// signature is checked before the timestamp). A Scheme that is not one of the constants is an
// error matching none of them, and so is SchemeHMAC: it verifies with its block, HMAC.Verify.
func VerifyRequest(scheme Scheme, h http.Header, body []byte, secrets [][]byte, now time.Time, tolerance time.Duration) error {
	switch scheme {
	case SchemeActledger, SchemeStripe:
		name := Header
		if scheme == SchemeStripe {
			name = StripeHeader
		}
		if !hasSecret(secrets) {
			return ErrNoSecret
		}
		value, err := headerValue(h, name)
		if err != nil {
			return err
		}
		return verifyTimestamped(name, value, body, secrets, now, tolerance)
	case SchemeGitHub:
		return verifyGitHub(h, body, secrets)
	case SchemeStandard:
		return verifyStandard(h, body, secrets, now, tolerance)
	case SchemeHMAC:
		return errHMACBlock
	default:
		return checkScheme(scheme)
	}
}

// SignHeaders returns the headers a supplier using scheme sends with body, signed with secret at
// time t; id is the message id (used by SchemeStandard only, ignored by the others). It is for
// the mock supplier and tests: set every returned header on the request. The error is for an
// unknown scheme or what SignStandard refuses.
func SignHeaders(scheme Scheme, secret []byte, id string, t time.Time, body []byte) (http.Header, error) {
	h := http.Header{}
	switch scheme {
	case SchemeActledger:
		h.Set(Header, Sign(secret, t, body))
	case SchemeStripe:
		h.Set(StripeHeader, SignStripe(secret, t, body))
	case SchemeGitHub:
		h.Set(GitHubHeader, SignGitHub(secret, body))
	case SchemeStandard:
		sig, err := SignStandard(secret, id, t, body)
		if err != nil {
			return nil, err
		}
		h.Set(StandardIDHeader, id)
		h.Set(StandardTimestampHeader, fmt.Sprint(t.Unix()))
		h.Set(StandardSignatureHeader, sig)
	case SchemeHMAC:
		return nil, errHMACBlock
	default:
		return nil, checkScheme(scheme)
	}
	return h, nil
}

// errHMACBlock is what the scheme-level functions answer for SchemeHMAC, whose shape is a
// configuration: they cannot know its headers.
var errHMACBlock = errors.New("the hmac scheme signs and verifies with its hmac block (HMAC.Sign, HMAC.Verify)")

// checkScheme returns ParseScheme's error for a Scheme that is not one of the constants.
func checkScheme(s Scheme) error {
	_, err := ParseScheme(string(s))
	return err
}

// headerValue returns the one value of header name. Absent or empty is *MissingHeaderError; sent
// more than once is malformed (a proxy and this code could read different copies); longer than
// maxHeaderLen is malformed before any work is spent on it.
func headerValue(h http.Header, name string) (string, error) {
	values := h.Values(name)
	switch {
	case len(values) == 0 || len(values) == 1 && strings.TrimSpace(values[0]) == "":
		return "", &MissingHeaderError{Header: name}
	case len(values) > 1:
		return "", fmt.Errorf("%w: header %s sent %d times", ErrMalformed, name, len(values))
	case len(values[0]) > maxHeaderLen:
		return "", fmt.Errorf("%w: header %s longer than %d bytes", ErrMalformed, name, maxHeaderLen)
	}
	return strings.TrimSpace(values[0]), nil
}
