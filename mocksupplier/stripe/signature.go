package stripe

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// SignatureHeader is the header Stripe signs webhook deliveries in.
const SignatureHeader = "Stripe-Signature"

// signature is the Stripe-Signature value for body sent at t: t=<unix seconds>,v1=<hex
// HMAC-SHA256 under secret of "<t>.<body>">. The secret is the endpoint's whole signing secret
// (whsec_…) as bytes. With v0, a second signature under a secret nobody knows follows, in the
// v0 scheme Stripe has added to test-mode events, which a verifier must ignore.
func signature(secret string, t time.Time, body []byte, v0 string) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	h := "t=" + ts + ",v1=" + hex.EncodeToString(hmacSHA256(secret, ts, body))
	if v0 != "" {
		h += ",v0=" + hex.EncodeToString(hmacSHA256(v0, ts, body))
	}
	return h
}

func hmacSHA256(secret, ts string, body []byte) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return mac.Sum(nil)
}
