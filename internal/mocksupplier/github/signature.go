package github

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"net/http"

	"github.com/actledger/actledger/webhook"
)

// sign sets the two signature headers GitHub sends with a delivery when the webhook has a secret
// (https://docs.github.com/webhooks/webhook-events-and-payloads#delivery-headers): the HMAC hex
// digest of the raw body keyed with the secret, SHA-256 in X-Hub-Signature-256 (package
// webhook's SignGitHub) and, kept for old receivers, SHA-1 in X-Hub-Signature.
func sign(h http.Header, secret string, body []byte) {
	h.Set("X-Hub-Signature", signature1(secret, body))
	h.Set(webhook.GitHubHeader, webhook.SignGitHub([]byte(secret), body))
}

// signature1 is the X-Hub-Signature value: "sha1=" + hex(HMAC-SHA1(secret, body)). Package
// webhook signs no SHA-1 (actledger never trusts it), so the fake computes it itself.
func signature1(secret string, body []byte) string {
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write(body)
	return "sha1=" + hex.EncodeToString(mac.Sum(nil))
}
