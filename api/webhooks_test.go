package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/webhook"
)

var webhookSecret = []byte("s3cret")

// withWebhooks configures provider "acme" with secrets; every other
// provider is unknown.
func withWebhooks(secrets ...[]byte) option {
	return func(c *api.Config) {
		c.WebhookSecrets = func(p string) ([][]byte, bool) {
			if p != "acme" {
				return nil, false
			}
			return secrets, true
		}
	}
}

func webhookBody(eventID string) []byte {
	return []byte(fmt.Sprintf(`{"event_id":%q,"type":"order.created","reference":"al_0193a7a0-0000-7000-8000-000000000001",`+
		`"provider_reference":"ord_1","status":"succeeded","data":{"total":"12.50"},"livemode":false}`, eventID))
}

// postWebhook sends body to /v1/webhooks/provider with signature as the
// Webhook-Signature header (none when empty).
func (f *fixture) postWebhook(t *testing.T, provider, signature string, body []byte) response {
	t.Helper()
	req, err := http.NewRequest("POST", f.srv.URL+"/v1/webhooks/"+provider, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if signature != "" {
		req.Header.Set(webhook.Header, signature)
	}
	return send(t, req)
}

// assertNothingStored fails t unless the inbox and the outbox are empty.
func (f *fixture) assertNothingStored(t *testing.T) {
	t.Helper()
	if n, m := f.count(t, "webhook_events"), f.count(t, "outbox"); n != 0 || m != 0 {
		t.Errorf("webhook_events %d, outbox %d; want 0 and 0", n, m)
	}
}

func TestWebhookSignatureFailuresStoreNothing(t *testing.T) {
	t.Parallel()
	f := setup(t, withWebhooks(webhookSecret))
	body := webhookBody("evt_1")
	// Each case signs when it sends, so time spent waiting for a parallel
	// slot does not move its timestamp. Signatures carry whole seconds:
	// round away from now, so "301 s" is at least 301 s whatever the
	// sub-second.
	signAt := func(secret []byte, offset time.Duration) func() string {
		return func() string {
			at := f.clock.Now().Add(offset)
			if offset > 0 {
				at = at.Add(time.Second)
			}
			return webhook.Sign(secret, at.Truncate(time.Second), body)
		}
	}
	tests := []struct {
		name string
		sign func() string
		body []byte
		code string
	}{
		{"signed with another secret", signAt([]byte("not-the-secret"), 0), body, "invalid_signature"},
		{"301 s old", signAt(webhookSecret, -301*time.Second), body, "stale_signature"},
		{"301 s in the future", signAt(webhookSecret, 301*time.Second), body, "stale_signature"},
		{"missing header", func() string { return "" }, body, "invalid_signature"},
		{"malformed header", func() string { return "t=abc,v1=zz" }, body, "invalid_signature"},
		{"tampered body", signAt(webhookSecret, 0), bytes.Replace(body, []byte("succeeded"), []byte("failed"), 1), "invalid_signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := f.postWebhook(t, "acme", tt.sign(), tt.body)
			if r.status != 401 || r.errorCode() != tt.code {
				t.Errorf("got %d %s, want 401 %s", r.status, r.raw, tt.code)
			}
		})
	}
	t.Cleanup(func() { f.assertNothingStored(t) })
}

func TestUnknownProviderWebhookIs404(t *testing.T) {
	t.Parallel()
	body := webhookBody("evt_1")
	configured := setup(t, withWebhooks(webhookSecret))
	unconfigured := setup(t) // WebhookSecrets is nil
	tests := []struct {
		name     string
		f        *fixture
		provider string
	}{
		{"provider not configured", configured, "globex"},
		{"no webhook config at all", unconfigured, "acme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Validly signed and oversized: the provider check comes first.
			sig := webhook.Sign(webhookSecret, tt.f.clock.Now(), body)
			for _, b := range [][]byte{body, bytes.Repeat([]byte("x"), api.DefaultMaxBody+1)} {
				r := tt.f.postWebhook(t, tt.provider, sig, b)
				if r.status != 404 || r.errorCode() != "unknown_provider" {
					t.Errorf("got %d %s, want 404 unknown_provider", r.status, r.raw)
				}
			}
			tt.f.assertNothingStored(t)
		})
	}
}

func TestOversizedWebhookIs413(t *testing.T) {
	t.Parallel()
	f := setup(t, withWebhooks(webhookSecret))
	huge := []byte(`{"event_id":"evt_1","reference":"r","provider_reference":"p","status":"succeeded","data":"` +
		strings.Repeat("a", api.DefaultMaxBody) + `"}`)
	tests := []struct {
		name      string
		signature string
	}{
		{"validly signed", webhook.Sign(webhookSecret, f.clock.Now(), huge)},
		{"unsigned: size is checked before the signature", ""},
	}
	for _, tt := range tests {
		r := f.postWebhook(t, "acme", tt.signature, huge)
		if r.status != 413 || r.errorCode() != "body_too_large" {
			t.Errorf("%s: got %d %s, want 413 body_too_large", tt.name, r.status, r.raw)
		}
	}
	f.assertNothingStored(t)
}

func TestWebhookIsStoredWithItsOutboxRowOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, withWebhooks(webhookSecret))
	body := webhookBody("evt_42")
	r := f.postWebhook(t, "acme", webhook.Sign(webhookSecret, f.clock.Now(), body), body)
	if r.status != 202 || r.body["stored"] != true {
		t.Fatalf("first delivery: %d %s, want 202 stored", r.status, r.raw)
	}

	var (
		subject, msgID string
		payload        []byte
	)
	err := f.pool.QueryRow(context.Background(), `SELECT subject, msg_id, payload FROM outbox`).Scan(&subject, &msgID, &payload)
	if err != nil {
		t.Fatal(err)
	}
	if wantSubject, want := f.app.Broker.EvidenceSubject("acme"), ledger.WebhookMsgID("acme", "evt_42"); subject != wantSubject || msgID != want {
		t.Errorf("outbox row: subject %q msg_id %q, want %s %s", subject, msgID, wantSubject, want)
	}
	var msg ledger.EvidenceMessage
	if err := json.Unmarshal(payload, &msg); err != nil || msg.Kind != "webhook" || msg.WebhookEventID == 0 {
		t.Fatalf("outbox payload %s: %+v, %v", payload, msg, err)
	}
	ev, err := f.store.WebhookEvent(context.Background(), msg.WebhookEventID)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s %s %s %s %s %s", ev.Provider, ev.EventID, ev.Type, ev.Reference, ev.ProviderReference, ev.Status)
	want := "acme evt_42 order.created al_0193a7a0-0000-7000-8000-000000000001 ord_1 succeeded"
	if got != want {
		t.Errorf("stored event = %q, want %q", got, want)
	}
	var stored, sent map[string]any
	_ = json.Unmarshal(ev.Payload, &stored)
	_ = json.Unmarshal(body, &sent)
	if fmt.Sprint(stored) != fmt.Sprint(sent) {
		t.Errorf("payload = %s, want the whole body %s", ev.Payload, body)
	}
	if ev.AppliedAt != nil || ev.Outcome != nil {
		t.Errorf("a new event is applied already: %v %v", ev.AppliedAt, ev.Outcome)
	}

	// The same event again, signed afresh (as a supplier's retry is), and
	// even with another status: acknowledged, nothing new written.
	f.clock.Advance(time.Minute)
	again := bytes.Replace(body, []byte(`"status":"succeeded"`), []byte(`"status":"failed"`), 1)
	r = f.postWebhook(t, "acme", webhook.Sign(webhookSecret, f.clock.Now(), again), again)
	if r.status != 200 || r.body["stored"] != false || r.body["duplicate"] != true {
		t.Errorf("repeated event: %d %s, want 200 duplicate", r.status, r.raw)
	}
	if n, m := f.count(t, "webhook_events"), f.count(t, "outbox"); n != 1 || m != 1 {
		t.Errorf("webhook_events %d, outbox %d; want 1 and 1", n, m)
	}
}

func TestRotatedWebhookSecretIsAccepted(t *testing.T) {
	t.Parallel()
	newSecret := []byte("s3cret-next")
	f := setup(t, withWebhooks(webhookSecret, newSecret))
	for i, secret := range [][]byte{newSecret, webhookSecret} {
		body := webhookBody(fmt.Sprintf("evt_%d", i))
		if r := f.postWebhook(t, "acme", webhook.Sign(secret, f.clock.Now(), body), body); r.status != 202 {
			t.Errorf("signed with secret %d of 2: %d %s, want 202", i+1, r.status, r.raw)
		}
	}
	if n := f.count(t, "webhook_events"); n != 2 {
		t.Errorf("webhook_events = %d, want 2", n)
	}
}

func TestMalformedSignedWebhookIs400(t *testing.T) {
	t.Parallel()
	f := setup(t, withWebhooks(webhookSecret))
	tests := []struct {
		name, body, code, field string
	}{
		{"missing reference", `{"event_id":"e1","provider_reference":"p","status":"succeeded"}`, "invalid_field", "reference"},
		{"pending status", `{"event_id":"e1","reference":"r","provider_reference":"p","status":"pending"}`, "invalid_field", "status"},
		{"missing event_id", `{"reference":"r","provider_reference":"p","status":"succeeded"}`, "invalid_field", "event_id"},
		{"event_id over 1024 bytes", `{"event_id":"` + strings.Repeat("e", 1025) + `","reference":"r","status":"failed"}`, "invalid_field", "event_id"},
		{"NUL in the event_id", `{"event_id":"e\u00001","reference":"r","status":"failed"}`, "invalid_field", "event_id"},
		{"succeeded without provider_reference", `{"event_id":"e1","reference":"r","status":"succeeded"}`, "invalid_field", "provider_reference"},
		{"wrong type", `{"event_id":1,"reference":"r","status":"failed"}`, "invalid_field", "event_id"},
		{"not an object", `[1]`, "malformed_json", ""},
		{"null", `null`, "malformed_json", ""},
		{"trailing data", `{"event_id":"e1","reference":"r","status":"failed"}{}`, "malformed_json", ""},
		{"NUL in the data", `{"event_id":"e1","reference":"r","status":"failed","data":"a\u0000b"}`, "invalid_body", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := []byte(tt.body)
			r := f.postWebhook(t, "acme", webhook.Sign(webhookSecret, f.clock.Now(), body), body)
			if r.status != 400 || r.errorCode() != tt.code {
				t.Errorf("got %d %s, want 400 %s", r.status, r.raw, tt.code)
			}
			if msg, _ := r.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, tt.field) {
				t.Errorf("message %q does not name %q", msg, tt.field)
			}
		})
	}
	t.Cleanup(func() { f.assertNothingStored(t) })
}

func TestWebhookAcceptsFailedEventsAndUnknownFields(t *testing.T) {
	t.Parallel()
	f := setup(t, withWebhooks(webhookSecret))
	body := []byte(`{"event_id":"evt_f","reference":"r","status":"failed","api_version":"2025-01-01",` +
		`"data":{"escaped":"a\\u0000b"}}`)
	if r := f.postWebhook(t, "acme", webhook.Sign(webhookSecret, f.clock.Now(), body), body); r.status != 202 {
		t.Errorf("failed event without type or provider_reference: %d %s, want 202", r.status, r.raw)
	}
}

// TestWebhookDuringPostgresOutageIs503: a supplier must see a retryable
// answer, never a 2xx, when the event could not be stored.
func TestWebhookDuringPostgresOutageIs503(t *testing.T) {
	t.Parallel()
	pool, proxy := testdb.NewBehindProxy(t)
	f := setupWithPool(t, pool, withWebhooks(webhookSecret))
	body := webhookBody("evt_outage")

	proxy.Cut()
	r := f.postWebhook(t, "acme", webhook.Sign(webhookSecret, f.clock.Now(), body), body)
	if r.status != 503 || r.errorCode() != "unavailable" {
		t.Errorf("during outage: %d %s, want 503 unavailable", r.status, r.raw)
	}
	proxy.Restore()
	r = f.postWebhook(t, "acme", webhook.Sign(webhookSecret, f.clock.Now(), body), body)
	if r.status != 202 {
		t.Errorf("after recovery: %d %s, want 202", r.status, r.raw)
	}
}

func TestMarkWebhookAppliedKeepsTheFirstMark(t *testing.T) {
	t.Parallel()
	f := setup(t, withWebhooks(webhookSecret))
	ctx := context.Background()
	stored, err := f.store.StoreWebhook(ctx, ledger.WebhookEvent{
		Provider: "acme", EventID: "evt_1", Reference: "r", Status: "failed", Payload: []byte(`{}`),
	})
	if err != nil || !stored {
		t.Fatalf("StoreWebhook = %v, %v", stored, err)
	}
	var id int64
	if err := f.pool.QueryRow(ctx, `SELECT id FROM webhook_events`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := f.store.MarkWebhookApplied(ctx, id, "settled"); err != nil {
		t.Fatalf("first mark: %v", err)
	}
	// A redelivered evidence message marks again: no error, first mark kept.
	f.clock.Advance(time.Minute)
	if err := f.store.MarkWebhookApplied(ctx, id, "other"); err != nil {
		t.Errorf("second mark = %v, want nil", err)
	}
	if err := f.store.MarkWebhookApplied(ctx, id+1000, "x"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("mark of a missing event = %v, want ErrNotFound", err)
	}
	if _, err := f.store.WebhookEvent(ctx, id+1000); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("WebhookEvent of a missing event = %v, want ErrNotFound", err)
	}
	ev, err := f.store.WebhookEvent(ctx, id)
	if err != nil || ev.AppliedAt == nil || ev.Outcome == nil || *ev.Outcome != "settled" {
		t.Fatalf("after marks: %+v, %v; want applied with outcome settled", ev, err)
	}
	if age := f.clock.Now().Sub(*ev.AppliedAt); age < 50*time.Second {
		t.Errorf("applied_at is %s old, want the first mark's time (about 1m)", age)
	}
}

// A supplier's event ids are its own free text: whatever they hold, they
// are stored (a refused event would be resent forever), deduplicated, and
// announced under a header-safe Nats-Msg-Id.
func TestAnyEventIDTextIsStoredOnceUnderAHeaderSafeMsgID(t *testing.T) {
	t.Parallel()
	f := setup(t, withWebhooks(webhookSecret))
	for _, id := range []string{"evt 1 with spaces", "evt\nwith a newline", "événement-№2", strings.Repeat("x", 1024)} {
		body := webhookBody(id)
		for _, want := range []int{202, 200} { // stored, then a repeat acknowledged and ignored
			if r := f.postWebhook(t, "acme", webhook.Sign(webhookSecret, f.clock.Now(), body), body); r.status != want {
				t.Errorf("event id %.20q: %d %s, want %d", id, r.status, r.raw, want)
			}
		}
	}
	var rows, unsafe int
	err := f.pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE msg_id !~ '^webhook\.acme\.[0-9a-f]{64}$') FROM outbox`).Scan(&rows, &unsafe)
	if err != nil {
		t.Fatal(err)
	}
	if rows != 4 || unsafe != 0 {
		t.Errorf("%d outbox rows (%d with an unsafe msg id), want 4 and 0", rows, unsafe)
	}
}

// A well-signed webhook whose body Postgres cannot store as jsonb (a lone
// surrogate escape, bytes that are not UTF-8) is answered 400 naming why,
// never a 500 that the supplier would redeliver for ever; nothing is
// stored.
func TestSignedWebhookPostgresCannotStoreIsRefusedNot500(t *testing.T) {
	t.Parallel()
	f := setup(t, withWebhooks(webhookSecret))
	for i, body := range []string{
		`{"event_id":"e1","type":"t","reference":"r","provider_reference":"p","status":"succeeded","data":{"note":"\ud800"}}`,
		`{"event_id":"e2","type":"t","reference":"r","provider_reference":"p","status":"succeeded","data":{"note":"\udfff!"}}`,
		"{\"event_id\":\"e3\",\"type\":\"t\",\"reference\":\"r\",\"provider_reference\":\"p\",\"status\":\"succeeded\",\"data\":{\"note\":\"\xff\"}}",
	} {
		r := f.postWebhook(t, "acme", webhook.Sign(webhookSecret, f.clock.Now(), []byte(body)), []byte(body))
		if r.status != 400 || r.errorCode() != "invalid_body" {
			t.Errorf("body %d: got %d %s, want 400 invalid_body", i, r.status, r.raw)
		}
	}
	if n := f.count(t, "webhook_events"); n != 0 {
		t.Errorf("webhook_events: %d, want 0", n)
	}
}
