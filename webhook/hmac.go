package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// SchemeHMAC is the configurable scheme: one header carrying HMAC-SHA256 of a template over the
// body and, optionally, a timestamp header, keyed with the secret's bytes as set. Its shape is an
// HMAC value (the providers file's webhook.hmac block); Zendesk's, Shopify's and Slack's schemes
// are each one HMAC value, not code of their own.
const SchemeHMAC Scheme = "hmac"

// The encodings of an HMAC signature header.
const (
	EncodingHex    = "hex"
	EncodingBase64 = "base64"
)

// The placeholders of HMAC.Signed.
const (
	signedTimestamp = "{timestamp}"
	signedBody      = "{body}"
)

// HMAC describes a supplier's HMAC-SHA256 signature: where it is, how it is written and what it
// covers. Check it once, when the configuration loads; Verify refuses a value Check refuses.
type HMAC struct {
	// Header carries the signature (yaml "header"), e.g. X-Shopify-Hmac-Sha256.
	Header string
	// Encoding is how the digest is written, "hex" or "base64" (yaml "encoding").
	Encoding string
	// Prefix comes before the encoded digest and is required (yaml "prefix"), e.g. "sha256=" or
	// "v0=".
	Prefix string
	// TimestampHeader carries the time the supplier signed at, unix seconds or RFC 3339 (yaml
	// "timestamp_header"). When set, a webhook signed more than the tolerance away from now is
	// ErrStale, and Signed must use {timestamp}.
	TimestampHeader string
	// Signed is the signed text (yaml "signed"): a template over {timestamp} and {body}, every
	// other character taken literally; default "{body}". It must contain {body} exactly once.
	Signed string
}

// SignedTemplate returns Signed, or "{body}" when it is empty.
func (c HMAC) SignedTemplate() string {
	if c.Signed == "" {
		return signedBody
	}
	return c.Signed
}

// HMACFieldError names the field of an HMAC block that is wrong, as the providers file spells it.
type HMACFieldError struct {
	Field string
	Err   error
}

func (e *HMACFieldError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *HMACFieldError) Unwrap() error { return e.Err }

// Check returns c's Problems joined; nil when c can verify webhooks.
func (c HMAC) Check() error {
	var errs []error
	for _, p := range c.Problems() {
		errs = append(errs, p)
	}
	return errors.Join(errs...)
}

// Problems returns every problem of c, each naming its field, for a configuration loader that
// reports them all.
func (c HMAC) Problems() []*HMACFieldError {
	var errs []*HMACFieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, &HMACFieldError{Field: field, Err: fmt.Errorf(format, args...)})
	}
	switch {
	case strings.TrimSpace(c.Header) == "":
		bad("header", "is required: it names the header that carries the signature")
	case http.CanonicalHeaderKey(c.Header) == http.CanonicalHeaderKey(c.TimestampHeader):
		bad("timestamp_header", "must differ from header")
	}
	if c.Encoding != EncodingHex && c.Encoding != EncodingBase64 {
		bad("encoding", "must be %q or %q, got %q", EncodingHex, EncodingBase64, c.Encoding)
	}
	tmpl := c.SignedTemplate()
	if n := strings.Count(tmpl, signedBody); n != 1 {
		bad("signed", "must contain %s exactly once, got %q", signedBody, tmpl)
	}
	hasTS := strings.Contains(tmpl, signedTimestamp)
	switch {
	case c.TimestampHeader == "" && hasTS:
		bad("signed", "uses %s: timestamp_header is required", signedTimestamp)
	case c.TimestampHeader != "" && !hasTS:
		bad("signed", "must use %s when timestamp_header is set: an unsigned timestamp proves nothing", signedTimestamp)
	case strings.Count(tmpl, signedTimestamp) > 1:
		bad("signed", "must contain %s at most once", signedTimestamp)
	}
	return errs
}

// Headers returns the headers c reads, the signature's first.
func (c HMAC) Headers() []string {
	if c.TimestampHeader == "" {
		return []string{c.Header}
	}
	return []string{c.Header, c.TimestampHeader}
}

// Verify is VerifyRequest for SchemeHMAC: the signature in c.Header, after c.Prefix, must be the
// HMAC-SHA256 of c's signed text under one of secrets (each used as its bytes), and the
// timestamp, when c has one, within tolerance (<= 0: DefaultTolerance) of now. Its errors match
// the same sentinels as VerifyRequest's; a c that Check refuses is an error matching none.
func (c HMAC) Verify(h http.Header, body []byte, secrets [][]byte, now time.Time, tolerance time.Duration) error {
	if err := c.Check(); err != nil {
		return fmt.Errorf("hmac scheme: %w", err)
	}
	if !hasSecret(secrets) {
		return ErrNoSecret
	}
	value, err := headerValue(h, c.Header)
	if err != nil {
		return err
	}
	var tsText string
	var signedAt time.Time
	if c.TimestampHeader != "" {
		if tsText, err = headerValue(h, c.TimestampHeader); err != nil {
			return err
		}
		if signedAt, err = parseHMACTimestamp(c.TimestampHeader, tsText); err != nil {
			return err
		}
	}
	encoded, ok := strings.CutPrefix(value, c.Prefix)
	if !ok {
		return fmt.Errorf("%w: %s must start with %q", ErrMalformed, c.Header, c.Prefix)
	}
	sig, err := c.decode(encoded)
	if err != nil || len(sig) != sha256.Size {
		return fmt.Errorf("%w: %s must be %q followed by the %s of %d bytes", ErrMalformed, c.Header, c.Prefix, c.Encoding, sha256.Size)
	}
	if !anyMatch(secrets, [][]byte{sig}, func(secret []byte) []byte { return c.mac(secret, tsText, body) }) {
		return ErrMismatch
	}
	if c.TimestampHeader == "" {
		return nil
	}
	return checkAgeTime(signedAt, now, tolerance)
}

// Sign returns the headers a supplier signing as c sends with body at time t, the timestamp as
// unix seconds. It is for the supplier doubles and tests; c must pass Check.
func (c HMAC) Sign(secret []byte, t time.Time, body []byte) http.Header {
	h := http.Header{}
	var ts string
	if c.TimestampHeader != "" {
		ts = fmt.Sprint(t.Unix())
		h.Set(c.TimestampHeader, ts)
	}
	h.Set(c.Header, c.Prefix+c.encode(c.mac(secret, ts, body)))
	return h
}

func (c HMAC) decode(s string) ([]byte, error) {
	if c.Encoding == EncodingHex {
		return hex.DecodeString(s)
	}
	return base64.StdEncoding.DecodeString(s)
}

func (c HMAC) encode(b []byte) string {
	if c.Encoding == EncodingHex {
		return hex.EncodeToString(b)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// mac computes HMAC-SHA256(secret, signed text), the text written straight into the MAC: the
// template's literal parts, the timestamp as sent and the raw body.
func (c HMAC) mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	rest := c.SignedTemplate()
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		switch {
		case i < 0:
			m.Write([]byte(rest))
			rest = ""
		case strings.HasPrefix(rest[i:], signedBody):
			m.Write([]byte(rest[:i]))
			m.Write(body)
			rest = rest[i+len(signedBody):]
		case strings.HasPrefix(rest[i:], signedTimestamp):
			m.Write([]byte(rest[:i]))
			m.Write([]byte(ts))
			rest = rest[i+len(signedTimestamp):]
		default:
			m.Write([]byte(rest[:i+1]))
			rest = rest[i+1:]
		}
	}
	return m.Sum(nil)
}

// parseHMACTimestamp reads unix seconds (Slack) or RFC 3339 (Zendesk).
func parseHMACTimestamp(name, s string) (time.Time, error) {
	if ts, err := parseUnix(name, s); err == nil {
		return time.Unix(ts, 0), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s must be unix seconds or RFC 3339", ErrMalformed, name)
	}
	return t, nil
}

// checkAgeTime is checkAge for a time already parsed.
func checkAgeTime(t, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if age := now.Sub(t); age > tolerance || age < -tolerance {
		return fmt.Errorf("%w: signed at %s, %s from now (tolerance %s)", ErrStale, t.UTC().Format(time.RFC3339), age.Round(time.Second), tolerance)
	}
	return nil
}
