package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks scheme, as its specification states it
// (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md,
// "Signature scheme", "Webhook headers", "Verifying signatures"):
//
//   - three headers: webhook-id (the message's unique id, the same on every retry),
//     webhook-timestamp (integer unix seconds of this attempt) and webhook-signature;
//   - the signed content is "<webhook-id>.<webhook-timestamp>.<raw body>", signed with
//     HMAC-SHA256 ("symmetric", identifier v1); webhook-signature is a space-delimited list of
//     "<identifier>,<base64 signature>" entries, one per active key so that a secret can be
//     rotated without downtime, and the receiver tries each until one matches;
//   - entries with another identifier (v1a, the asymmetric ed25519 scheme) are not HMACs and are
//     ignored here;
//   - the comparison must be constant time and the timestamp must be within a tolerance of now
//     (the reference libraries use 5 minutes, in both directions);
//   - a symmetric secret is shown as "whsec_" followed by the base64 of the key bytes, and the
//     HMAC key is the decoded bytes, not the text;
//   - the id and the timestamp must not contain "." (the separator of the signed content).
//
// A secret without the whsec_ prefix is decoded the same way: the reference libraries strip the
// prefix when present and base64-decode what remains either way (libraries/go/webhook.go,
// NewWebhook, and its TestWebhookPrefix, which verifies the same message with and without the
// prefix; libraries/python/standardwebhooks/webhooks.py, which also accepts unpadded base64). So
// does this package: padded or unpadded standard base64, prefix optional. A secret that does not
// decode to at least one byte is unusable; VerifyRequest skips it and, if no secret is usable,
// returns ErrNoSecret. Scheme.CheckSecret reports it at start.
//
// A webhook-id containing "." is refused as malformed: with a dot in the id the boundaries of
// the signed content are ambiguous (part of the body could be passed off as id and timestamp),
// and the specification forbids it.

// The HTTP headers of the Standard Webhooks scheme, [SchemeStandard], spelled as the
// specification spells them.
const (
	StandardIDHeader        = "webhook-id"
	StandardTimestampHeader = "webhook-timestamp"
	StandardSignatureHeader = "webhook-signature"
)

// standardSecretPrefix marks a Standard Webhooks symmetric secret.
const standardSecretPrefix = "whsec_"

// SignStandard returns the webhook-signature header value, "v1,<base64>", for body sent as
// message id at time t, signed with secret (whsec_<base64>; the prefix may be left out). The
// mock supplier and tests send it with webhook-id: id and webhook-timestamp: t.Unix() (or use
// SignHeaders, which builds all three). It refuses an unusable secret (matching ErrNoSecret),
// and an empty id or one containing "." (VerifyRequest would refuse the webhook); t must not be
// before 1970.
func SignStandard(secret []byte, id string, t time.Time, body []byte) (string, error) {
	key, err := standardKey(secret)
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", errors.New("a standard webhook needs a message id")
	}
	if err := checkStandardID(id); err != nil {
		return "", err
	}
	sig := standardMAC(key, id, strconv.FormatInt(t.Unix(), 10), body)
	return "v1," + base64.StdEncoding.EncodeToString(sig), nil
}

// verifyStandard is VerifyRequest for SchemeStandard.
func verifyStandard(h http.Header, body []byte, secrets [][]byte, now time.Time, tolerance time.Duration) error {
	keys := make([][]byte, 0, len(secrets))
	for _, secret := range secrets {
		if key, err := standardKey(secret); err == nil {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return fmt.Errorf("%w: no secret is a usable %s<base64> secret", ErrNoSecret, standardSecretPrefix)
	}
	id, err := headerValue(h, StandardIDHeader)
	if err != nil {
		return err
	}
	tsText, err := headerValue(h, StandardTimestampHeader)
	if err != nil {
		return err
	}
	list, err := headerValue(h, StandardSignatureHeader)
	if err != nil {
		return err
	}
	if err := checkStandardID(id); err != nil {
		return err
	}
	ts, err := parseUnix(StandardTimestampHeader, tsText)
	if err != nil {
		return err
	}
	sigs, err := parseStandardSignatures(list)
	if err != nil {
		return err
	}
	if !anyMatch(keys, sigs, func(key []byte) []byte { return standardMAC(key, id, tsText, body) }) {
		return ErrMismatch
	}
	return checkAge(ts, now, tolerance)
}

// parseStandardSignatures decodes the v1 entries of a webhook-signature value. Entries are
// separated by spaces; each is "<identifier>,<signature>". Entries with another identifier are
// ignored; at least one v1 is required and every v1 must be the base64 of 32 bytes.
func parseStandardSignatures(list string) ([][]byte, error) {
	var sigs [][]byte
	for entry := range strings.FieldsSeq(list) {
		version, value, ok := strings.Cut(entry, ",")
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: %s entry %q is not <version>,<signature>", ErrMalformed, StandardSignatureHeader, truncate(entry))
		case version == "":
			return nil, fmt.Errorf("%w: %s entry with an empty version", ErrMalformed, StandardSignatureHeader)
		case version != "v1":
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(value)
		if err != nil || len(sig) != sha256.Size {
			return nil, fmt.Errorf("%w: a v1 signature in %s must be the base64 of %d bytes", ErrMalformed, StandardSignatureHeader, sha256.Size)
		}
		sigs = append(sigs, sig)
	}
	if len(sigs) == 0 {
		return nil, fmt.Errorf("%w: no v1 signature in %s", ErrMalformed, StandardSignatureHeader)
	}
	return sigs, nil
}

// checkStandardID refuses an id that contains ".".
func checkStandardID(id string) error {
	if strings.Contains(id, ".") {
		return fmt.Errorf("%w: %s must not contain %q", ErrMalformed, StandardIDHeader, ".")
	}
	return nil
}

// standardKey returns the HMAC key of a Standard Webhooks secret: the base64 (padded or not)
// after an optional whsec_ prefix, decoded. The error never quotes the secret.
func standardKey(secret []byte) ([]byte, error) {
	encoded := strings.TrimPrefix(string(secret), standardSecretPrefix)
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(encoded)
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrNoSecret, errStandardSecret)
	case len(key) == 0:
		return nil, fmt.Errorf("%w: the secret is empty", ErrNoSecret)
	}
	return key, nil
}

var errStandardSecret = errors.New("a standard webhook secret must be " + standardSecretPrefix + "<base64>, and this one is not base64")

// standardMAC computes HMAC-SHA256(key, "<id>.<ts>.<body>").
func standardMAC(key []byte, id, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}
