// Package webhook signs and verifies supplier webhooks.
//
// A supplier proves a webhook came from it with the header
//
//	Webhook-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
//
// Verification accepts several v1= entries in one header (a supplier rotating its secret signs
// with both) and several secrets on our side (we rotate too), compares in constant time
// (hmac.Equal) and rejects timestamps more than a tolerance (default 300 s) away from now in
// either direction, so a captured webhook cannot be replayed later.
//
// The package must never: accept a webhook when no non-empty secret is configured (an HMAC
// with an empty key is forgeable by anyone); compare signatures with anything but hmac.Equal;
// parse or trust the body before the signature is verified (callers verify the raw bytes, then
// decode); or include secrets or expected signatures in its errors.
package webhook
