package zendesk

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
)

// The headers Zendesk signs webhook requests in.
const (
	SignatureHeader          = "X-Zendesk-Webhook-Signature"
	SignatureTimestampHeader = "X-Zendesk-Webhook-Signature-Timestamp"
)

// signature is the X-Zendesk-Webhook-Signature value: base64(HMAC-SHA256(secret, timestamp +
// body)), the timestamp being the X-Zendesk-Webhook-Signature-Timestamp value, concatenated with
// the raw body with no separator. The fake computes it itself, apart from actledger's own
// verifier (webhook.HMAC), so that the recipe's test checks one against the other.
func signature(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
