package notify_test

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

// delivery is one request a test receiver got.
type delivery struct {
	ID, Timestamp, Signature string
	Body                     []byte
}

// event is a delivery's body.
type event struct {
	Type      string         `json:"type"`
	Timestamp string         `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

func (d delivery) event(t *testing.T) event {
	t.Helper()
	var e event
	if err := json.Unmarshal(d.Body, &e); err != nil {
		t.Fatalf("body %s: %v", d.Body, err)
	}
	return e
}

// receiver is an httptest receiver that records every request and answers
// with answer (nil: 200).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []delivery
	answer func(n int, w http.ResponseWriter, r *http.Request)
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, delivery{ID: r.Header.Get("webhook-id"), Timestamp: r.Header.Get("webhook-timestamp"),
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

// deliveries returns what the receiver got so far.
func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

// distinct are the deliveries with repeats of a webhook-id dropped, as a
// receiver deduplicates.
func (rc *receiver) distinct() []delivery {
	seen := map[string]bool{}
	var out []delivery
	for _, d := range rc.deliveries() {
		if !seen[d.ID] {
			seen[d.ID] = true
			out = append(out, d)
		}
	}
	return out
}

// newSecret is a fresh Standard Webhooks secret, whsec_<base64>.
func newSecret(t *testing.T) string {
	t.Helper()
	key := make([]byte, 24)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// verify checks d's signature as a receiver would, with crypto/hmac alone:
// the key is the secret's base64 after whsec_, the signed content
// id.timestamp.body, the header v1,<base64 MAC>.
func verify(t *testing.T, secret string, d delivery) {
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
