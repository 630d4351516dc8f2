// Package webhook signs and verifies supplier webhooks.
//
// A supplier proves a webhook came from it with an HMAC-SHA256 of the raw body, keyed with a
// secret we share, in one of four schemes (Scheme; a provider's `webhook.signature` setting):
//
//	actledger  Webhook-Signature: t=<unix seconds>,v1=<hex HMAC(secret, "<t>.<raw body>")>
//	stripe     Stripe-Signature: t=<unix seconds>,v1=<hex HMAC(secret, "<t>.<raw body>")>
//	github     X-Hub-Signature-256: sha256=<hex HMAC(secret, raw body)>
//	standard   webhook-id: <id>, webhook-timestamp: <unix seconds>,
//	           webhook-signature: v1,<base64 HMAC(key, "<id>.<timestamp>.<raw body>")>
//
// actledger is our own (v1) scheme, the one the mock supplier sends. stripe is Stripe's
// (https://docs.stripe.com/webhooks#verify-manually): the same format under another header, the
// whsec_… secret used as given. github is GitHub's
// (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries). standard is
// Standard Webhooks
// (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md):
// the secret is whsec_<base64> and the key is the decoded bytes. The files stripe.go, github.go
// and standard.go state each scheme's rules and where they come from. actledger's
// Webhook-Signature and standard's webhook-signature are the same HTTP header with different
// contents: the configured scheme, never the request, decides how it is read.
//
// VerifyRequest verifies a request under a scheme; Verify is the actledger scheme for a caller
// holding the header's value. Verification accepts several signatures in one header where the
// scheme allows it (a supplier rotating its secret signs with both) and several secrets on our
// side (we rotate too), compares in constant time (hmac.Equal) and, for the schemes with a
// timestamp, rejects timestamps more than a tolerance (default 300 s) away from now in either
// direction, so a captured webhook cannot be replayed later. github has no timestamp: a replayed
// GitHub delivery verifies, and only the event id stops it. Entries of other versions (Stripe's
// v0, Standard Webhooks' v1a, actledger's v0/v2) are ignored, never trusted. Errors match the
// sentinels ErrMalformed (ErrMissing and *MissingHeaderError when a header is absent),
// ErrMismatch, ErrStale and ErrNoSecret. SignHeaders, Sign, SignStripe, SignGitHub and
// SignStandard produce what each supplier sends, so fakes and tests never recompute an HMAC.
//
// The package must never: accept a webhook when no non-empty secret is configured (an HMAC
// with an empty key is forgeable by anyone); compare signatures with anything but hmac.Equal;
// parse or trust the body before the signature is verified (callers verify the raw bytes, then
// decode); or include secrets or expected signatures in its errors. Nor may it: choose or fall
// back to another scheme than the one configured; trust any signature but the scheme's own
// HMAC-SHA256 (GitHub's SHA-1 X-Hub-Signature, Stripe's v0 entries); or call a timestamp-less
// scheme replay-safe.
package webhook
