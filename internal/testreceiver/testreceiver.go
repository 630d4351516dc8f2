// Package testreceiver is a notification receiver for tests: an httptest
// server that records every request it gets, and the checks a receiver
// makes (a Standard Webhooks signature verified with crypto/hmac alone,
// never with the product's signer, so a test of the signer cannot agree
// with itself).
package testreceiver

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Delivery is one request a Receiver got.
type Delivery struct {
	ID, Timestamp, Signature string
	Body                     []byte
}

// Event is a delivery's body.
type Event struct {
	Type      string         `json:"type"`
	Timestamp string         `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

// Event decodes d's body, failing the test when it is not JSON.
func (d Delivery) Event(t testing.TB) Event {
	t.Helper()
	var e Event
	if err := json.Unmarshal(d.Body, &e); err != nil {
		t.Fatalf("body %s: %v", d.Body, err)
	}
	return e
}

// Answer answers the nth request (from 1) a Receiver got.
type Answer func(n int, w http.ResponseWriter, r *http.Request)

// Receiver records every request and answers each with its Answer (nil:
// 200). It is closed when the test ends.
type Receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []Delivery
	answer Answer
}

// New starts a Receiver.
func New(t testing.TB, answer Answer) *Receiver {
	t.Helper()
	rc := &Receiver{answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, Delivery{ID: r.Header.Get("webhook-id"), Timestamp: r.Header.Get("webhook-timestamp"),
			Signature: r.Header.Get("webhook-signature"), Body: body})
		n := len(rc.got)
		rc.mu.Unlock()
		if rc.answer != nil {
			rc.answer(n, w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// Deliveries returns what the receiver got so far, in order.
func (rc *Receiver) Deliveries() []Delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Delivery(nil), rc.got...)
}

// Distinct are the deliveries with repeats of a webhook-id dropped, as a
// receiver deduplicates.
func (rc *Receiver) Distinct() []Delivery {
	seen := map[string]bool{}
	var out []Delivery
	for _, d := range rc.Deliveries() {
		if !seen[d.ID] {
			seen[d.ID] = true
			out = append(out, d)
		}
	}
	return out
}

// Secret is a fresh Standard Webhooks secret, whsec_<base64>.
func Secret(t testing.TB) string {
	t.Helper()
	key := make([]byte, 24)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// Verify checks d's signature as a receiver would, with crypto/hmac alone:
// the key is the secret's base64 after whsec_, the signed content
// id.timestamp.body, the header v1,<base64 MAC>.
func Verify(t testing.TB, secret string, d Delivery) {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", d.ID, d.Timestamp, d.Body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(d.Signature), []byte(want)) {
		t.Errorf("webhook-signature %q does not verify (want %q) for id %q timestamp %q body %s", d.Signature, want, d.ID, d.Timestamp, d.Body)
	}
}
