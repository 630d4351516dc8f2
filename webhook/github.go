package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// GitHub's scheme, as GitHub documents it in "Validating webhook deliveries"
// (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries):
//
//   - the header is X-Hub-Signature-256, whose value always starts with "sha256=" followed by the
//     HMAC-SHA256 hex digest of the raw payload, keyed with the webhook's secret token as given;
//   - the comparison must be constant time;
//   - the older X-Hub-Signature (HMAC-SHA1) is sent for compatibility with existing integrations
//     and GitHub recommends the SHA-256 one instead
//     (https://docs.github.com/en/webhooks/webhook-events-and-payloads#delivery-headers); it is
//     never read here.
//
// The signature covers the body alone: there is no timestamp, so it can say nothing about
// replays. A replayed delivery verifies; the caller stops it by its event id. GitHub sends one
// signature per delivery, so rotation happens on our side only (several secrets).

// GitHubHeader is the HTTP header that carries GitHub's signature, [SchemeGitHub].
const GitHubHeader = "X-Hub-Signature-256"

// githubPrefix starts every GitHub signature.
const githubPrefix = "sha256="

// SignGitHub returns the X-Hub-Signature-256 header value for body signed with secret, as GitHub
// sends it: "sha256=<hex>". It is for the mock supplier and tests.
func SignGitHub(secret, body []byte) string {
	return githubPrefix + hex.EncodeToString(githubMAC(secret, body))
}

// verifyGitHub is VerifyRequest for SchemeGitHub. No timestamp, so never ErrStale.
func verifyGitHub(h http.Header, body []byte, secrets [][]byte) error {
	if !hasSecret(secrets) {
		return ErrNoSecret
	}
	value, err := headerValue(h, GitHubHeader)
	if err != nil {
		return err
	}
	digest, ok := strings.CutPrefix(value, githubPrefix)
	if !ok {
		return fmt.Errorf("%w: %s must start with %q", ErrMalformed, GitHubHeader, githubPrefix)
	}
	sig, err := hex.DecodeString(digest)
	if err != nil || len(sig) != sha256.Size {
		return fmt.Errorf("%w: %s must be %s followed by %d hex digits", ErrMalformed, GitHubHeader, githubPrefix, 2*sha256.Size)
	}
	if !anyMatch(secrets, [][]byte{sig}, func(secret []byte) []byte { return githubMAC(secret, body) }) {
		return ErrMismatch
	}
	return nil
}

// githubMAC computes HMAC-SHA256(secret, body).
func githubMAC(secret, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write(body)
	return h.Sum(nil)
}
