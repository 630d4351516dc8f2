package webhook

import "time"

// Stripe's scheme, as Stripe documents it in "Verify webhook signatures manually"
// (https://docs.stripe.com/webhooks#verify-manually) and as its Go library verifies it
// (https://github.com/stripe/stripe-go, webhook/client.go):
//
//   - the header is Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…], elements separated
//     by commas, each a prefix and a value separated by "=";
//   - v1 is the HMAC-SHA256, hex encoded, of "<t>.<raw body>", keyed with the endpoint's signing
//     secret exactly as Stripe shows it, whsec_ prefix included (the library keys the HMAC with
//     []byte(secret));
//   - while a secret is being rolled Stripe sends one v1 per active secret, and any may match;
//   - elements with any other prefix (such as v0) are ignored: only v1 is ever verified;
//   - the timestamp is signed with the body, so a tolerance on it (Stripe's libraries default to
//     300 s) stops a captured webhook from being replayed.
//
// That is, byte for byte, actledger's own format under another header name, and it is verified
// by the same code.

// StripeHeader is the HTTP header that carries Stripe's signature, [SchemeStripe].
const StripeHeader = "Stripe-Signature"

// SignStripe returns the Stripe-Signature header value for body signed with secret (the whsec_…
// text, used as given) at time t, as Stripe sends it: "t=<unix>,v1=<hex>". It is for the mock
// supplier and tests; t must not be before 1970.
func SignStripe(secret []byte, t time.Time, body []byte) string {
	return Sign(secret, t, body)
}
