package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

const (
	// Header is the HTTP header that carries actledger's own (v1) signature, [SchemeActledger].
	Header = "Webhook-Signature"
	// DefaultTolerance is how far a signature's timestamp may be from now, either way, before the
	// webhook is refused as a possible replay (or from a badly wrong clock).
	DefaultTolerance = 300 * time.Second
	// maxHeaderLen bounds the work spent on each header from an unauthenticated caller.
	maxHeaderLen = 4096
)

// Sentinel errors, for callers that log or count why a webhook was refused. Every one of them
// means "reject with 401, store nothing"; ErrNoSecret additionally means our configuration is
// incomplete.
var (
	// ErrMalformed: a header the scheme reads is missing, or not of the scheme's form (for
	// actledger and stripe t=<unix seconds>,v1=<hex>[,v1=…]). A missing header also matches
	// ErrMissing.
	ErrMalformed = errors.New("webhook signature header malformed")
	// ErrMissing: a header the scheme reads is absent or empty. Every error that matches it
	// matches ErrMalformed too, so a caller that does not care keeps one branch; one that logs
	// the difference asks errors.Is(err, ErrMissing) first, and errors.As with
	// *MissingHeaderError for the header's name.
	ErrMissing = errors.New("webhook signature header missing")
	// ErrStale: the signature is authentic but its timestamp is outside the tolerance, in the
	// past or in the future.
	ErrStale = errors.New("webhook signature timestamp outside tolerance")
	// ErrMismatch: no signature of the scheme's (v1, sha256=) matches under any of our secrets.
	ErrMismatch = errors.New("webhook signature mismatch")
	// ErrNoSecret: no usable secret is configured (none is non-empty or, for SchemeStandard,
	// none decodes), so nothing can be verified.
	ErrNoSecret = errors.New("no webhook secret configured")
)

// MissingHeaderError names the header a scheme needed and did not find (absent or empty). It
// matches both ErrMissing and ErrMalformed with errors.Is.
type MissingHeaderError struct {
	// Header is the header's name as the scheme spells it, e.g. "Stripe-Signature" or
	// "webhook-timestamp".
	Header string
}

func (e *MissingHeaderError) Error() string {
	return "webhook signature header missing: " + e.Header
}

// Is reports whether target is ErrMissing or ErrMalformed.
func (e *MissingHeaderError) Is(target error) bool {
	return target == ErrMissing || target == ErrMalformed
}

// Sign returns the Webhook-Signature header value for body signed with secret at time t. It is
// what a supplier (or the mock supplier, or a test) sends. t must not be before 1970: Verify
// accepts only unsigned unix seconds.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

// Verify checks header against body with any of secrets at time now. It returns nil only if
// some v1 signature in the header is the HMAC of "<t>.<body>" under some non-empty secret and t
// is within tolerance of now (tolerance <= 0 means DefaultTolerance). The signature is checked
// before the timestamp, so ErrStale always means an authentic but old (or future) webhook.
//
// Verify is [VerifyRequest] with [SchemeActledger] for a caller that holds the header's value.
func Verify(header string, body []byte, secrets [][]byte, now time.Time, tolerance time.Duration) error {
	return verifyTimestamped(Header, header, body, secrets, now, tolerance)
}

// verifyTimestamped verifies the "t=<unix>,v1=<hex>" format shared by actledger's scheme and
// Stripe's; name is the header it came from, for the errors.
func verifyTimestamped(name, header string, body []byte, secrets [][]byte, now time.Time, tolerance time.Duration) error {
	if !hasSecret(secrets) {
		return ErrNoSecret
	}
	ts, tsText, sigs, err := parse(name, header)
	if err != nil {
		return err
	}
	if !anyMatch(secrets, sigs, func(secret []byte) []byte { return mac(secret, tsText, body) }) {
		return ErrMismatch
	}
	return checkAge(ts, now, tolerance)
}

// anyMatch reports whether any of sigs equals expected(secret) for any non-empty secret. Every
// comparison is made, with hmac.Equal: no early exit that would tell an attacker which secret or
// entry came close.
func anyMatch(secrets, sigs [][]byte, expected func(secret []byte) []byte) bool {
	matched := false
	for _, secret := range secrets {
		if len(secret) == 0 {
			continue
		}
		want := expected(secret)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				matched = true
			}
		}
	}
	return matched
}

// checkAge returns ErrStale when the unix time ts is more than tolerance (<= 0:
// DefaultTolerance) away from now, in either direction.
func checkAge(ts int64, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	// time.Time.Sub saturates instead of overflowing, so absurd timestamps are simply stale.
	if age := now.Sub(time.Unix(ts, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("%w: signed at %d, %s from now (tolerance %s)", ErrStale, ts, age.Round(time.Second), tolerance)
	}
	return nil
}

func hasSecret(secrets [][]byte) bool {
	for _, s := range secrets {
		if len(s) > 0 {
			return true
		}
	}
	return false
}

// mac computes HMAC-SHA256(secret, "<ts>.<body>").
func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// parse splits the value of header name, "t=…,v1=…[,v1=…]", into the timestamp (as a number
// and as the text that was signed) and the decoded v1 signatures. Elements are separated by
// commas and may be surrounded by spaces; elements with another scheme (v0=, v2=) are ignored so
// that a supplier may add schemes without breaking us. Exactly one t is required, and at least
// one v1; every v1 must be 64 hex digits.
func parse(name, header string) (ts int64, tsText string, sigs [][]byte, err error) {
	if header == "" {
		return 0, "", nil, &MissingHeaderError{Header: name}
	}
	if len(header) > maxHeaderLen {
		return 0, "", nil, fmt.Errorf("%w: header %s longer than %d bytes", ErrMalformed, name, maxHeaderLen)
	}
	haveTS := false
	for part := range strings.SplitSeq(header, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return 0, "", nil, fmt.Errorf("%w: element %q is not key=value", ErrMalformed, truncate(part))
		}
		switch key {
		case "t":
			if haveTS {
				return 0, "", nil, fmt.Errorf("%w: more than one t", ErrMalformed)
			}
			if ts, err = parseUnix("t", value); err != nil {
				return 0, "", nil, err
			}
			tsText, haveTS = value, true
		case "v1":
			sig, err := hex.DecodeString(value)
			if err != nil || len(sig) != sha256.Size {
				return 0, "", nil, fmt.Errorf("%w: v1 must be %d hex digits", ErrMalformed, 2*sha256.Size)
			}
			sigs = append(sigs, sig)
		case "":
			return 0, "", nil, fmt.Errorf("%w: element with an empty key", ErrMalformed)
		}
	}
	if !haveTS {
		return 0, "", nil, fmt.Errorf("%w: no t= timestamp", ErrMalformed)
	}
	if len(sigs) == 0 {
		return 0, "", nil, fmt.Errorf("%w: no v1= signature", ErrMalformed)
	}
	return ts, tsText, sigs, nil
}

// parseUnix accepts decimal digits only: no sign, no spaces, no fractions. what names the field
// for the error.
func parseUnix(what, s string) (int64, error) {
	bad := fmt.Errorf("%w: %s must be unix seconds", ErrMalformed, what)
	if s == "" || len(s) > 20 {
		return 0, bad
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, bad
		}
	}
	ts, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, bad
	}
	return ts, nil
}

func truncate(s string) string {
	const n = 40
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
