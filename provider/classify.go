package provider

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter caps a supplier's Retry-After hint so that an absurd value cannot park an
// operation for years (or overflow a time.Duration).
const MaxRetryAfter = 24 * time.Hour

// Classify maps a supplier's HTTP answer to a Class. It is the single home of the response class
// table of the contract (docs/contract.md, "Providers file"):
//
//	2xx                                   → ClassSucceeded   (confirmed effect)
//	400, 401, 403, 404, 422               → ClassRejected    (confirmed rejection, no effect)
//	409                                   → ClassUnknown     (see below)
//	429                                   → ClassNotExecuted (Retry-After honoured when present)
//	503 with a parseable Retry-After      → ClassNotExecuted
//	503 without Retry-After, other 5xx    → ClassUnknown     (may have executed)
//	anything else (1xx, 3xx, 405, 408, …) → ClassUnknown     (the safe default)
//
// A 409 is unknown whether or not the supplier has an idempotency header. With one, the contract
// says the key is "still in progress there". Without one, a 409 is most often a uniqueness
// conflict on the reference we sent — i.e. evidence that an earlier attempt did land — so calling
// it "rejected, no effect" could be false; a lookup settles it instead. hasIdempotency only
// changes the explanation. Likewise a 503 whose Retry-After cannot be parsed is treated as having
// none: only a clear "come back later" proves the request was refused before any effect.
//
// Transport failures (no status at all) are not classified here: with no answer the only question
// is whether any bytes left, see [Result.Sent]. now is used to turn an HTTP-date Retry-After into
// a delay. The returned reason is a short human explanation for Result.Error.
func Classify(status int, hasIdempotency bool, header http.Header, now time.Time) (class Class, retryAfter time.Duration, reason string) {
	hint, hintOK := ParseRetryAfter(header.Get("Retry-After"), now)
	switch {
	case status >= 200 && status <= 299:
		return ClassSucceeded, 0, ""
	case status == http.StatusBadRequest, status == http.StatusUnauthorized,
		status == http.StatusForbidden, status == http.StatusNotFound,
		status == http.StatusUnprocessableEntity:
		return ClassRejected, 0, fmt.Sprintf("HTTP %d: supplier rejected the request, no effect", status)
	case status == http.StatusConflict && hasIdempotency:
		return ClassUnknown, 0, "HTTP 409 with an idempotency key: the key is still in progress at the supplier; look up later"
	case status == http.StatusConflict:
		return ClassUnknown, 0, "HTTP 409: conflict at the supplier, possibly with an earlier attempt that landed; look up to settle"
	case status == http.StatusTooManyRequests:
		return ClassNotExecuted, hint, "HTTP 429: rate limited, not executed"
	case status == http.StatusServiceUnavailable && hintOK:
		return ClassNotExecuted, hint, "HTTP 503 with Retry-After: refused before any effect"
	case status == http.StatusServiceUnavailable:
		return ClassUnknown, 0, "HTTP 503 without a usable Retry-After: may have executed"
	case status >= 500 && status <= 599:
		return ClassUnknown, 0, fmt.Sprintf("HTTP %d: server error, may have executed", status)
	default:
		return ClassUnknown, 0, fmt.Sprintf("HTTP %d: not an answer the contract classifies, treated as may have executed", status)
	}
}

// ParseRetryAfter parses a Retry-After header value: delay-seconds or an HTTP-date (RFC 9110
// §10.2.3). A date in the past gives 0. The result is capped at MaxRetryAfter. ok is false when
// the value is empty or unparseable.
func ParseRetryAfter(value string, now time.Time) (d time.Duration, ok bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if value[0] >= '0' && value[0] <= '9' {
		secs, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			// All digits but too large for uint64: still a clear "much later".
			var ne *strconv.NumError
			if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
				return MaxRetryAfter, true
			}
			return 0, false
		}
		if secs > uint64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	d = at.Sub(now)
	switch {
	case d < 0:
		return 0, true
	case d > MaxRetryAfter:
		return MaxRetryAfter, true
	}
	return d, true
}
