package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/gowebpki/jcs"
)

// FingerprintPrefix names the algorithm of every params fingerprint, so
// stored approvals stay checkable if canonicalisation ever changes.
const FingerprintPrefix = "jcs-sha256:"

// ErrInvalidParams: params must be a JSON object (it becomes the
// provider's request body) that RFC 8785 can canonicalise (e.g. numbers
// must fit an IEEE 754 double).
var ErrInvalidParams = errors.New("params must be a JSON object with canonicalisable values")

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of
// params and its fingerprint, "jcs-sha256:<hex of SHA-256 of the canonical
// bytes>". Key order and whitespace never change the fingerprint; any change
// of value does.
func Canonicalize(params []byte) (canonical []byte, fingerprint string, err error) {
	trimmed := bytes.TrimSpace(params)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, "", ErrInvalidParams
	}
	canonical, err = jcs.Transform(trimmed)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrInvalidParams, err)
	}
	sum := sha256.Sum256(canonical)
	return canonical, FingerprintPrefix + hex.EncodeToString(sum[:]), nil
}
