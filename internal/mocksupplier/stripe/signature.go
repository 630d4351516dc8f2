package stripe

import (
	"strings"
	"time"

	"github.com/actledger/actledger/webhook"
)

// SignatureHeader is the header Stripe signs webhook deliveries in.
const SignatureHeader = webhook.StripeHeader

// signature is the Stripe-Signature value for body sent at t: t=<unix seconds>,v1=<hex
// HMAC-SHA256 under secret of "<t>.<body>">. The secret is the endpoint's whole signing secret
// (whsec_…) as bytes. With v0, a second signature under a secret nobody knows follows, in the
// v0 scheme Stripe has added to test-mode events, which a verifier must ignore: the same HMAC
// as v1's, under the v0 secret.
func signature(secret string, t time.Time, body []byte, v0 string) string {
	h := webhook.SignStripe([]byte(secret), t, body)
	if v0 != "" {
		_, mac, _ := strings.Cut(webhook.SignStripe([]byte(v0), t, body), ",v1=")
		h += ",v0=" + mac
	}
	return h
}
