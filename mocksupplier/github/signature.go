package github

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
)

// The two signature headers GitHub sends with a delivery when the webhook has a secret
// (https://docs.github.com/webhooks/webhook-events-and-payloads#delivery-headers): the HMAC hex
// digest of the raw body keyed with the secret, SHA-256 in X-Hub-Signature-256 and, kept for old
// receivers, SHA-1 in X-Hub-Signature. This file is the fake's own signer so that the fake does
// not depend on the code under test; package webhook's signer may replace it later.

// signature256 is the X-Hub-Signature-256 value: "sha256=" + hex(HMAC-SHA256(secret, body)).
func signature256(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// signature1 is the X-Hub-Signature value: "sha1=" + hex(HMAC-SHA1(secret, body)).
func signature1(secret string, body []byte) string {
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write(body)
	return "sha1=" + hex.EncodeToString(mac.Sum(nil))
}
