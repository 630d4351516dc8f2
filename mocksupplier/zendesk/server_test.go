package zendesk_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actledger/actledger/mocksupplier/zendesk"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fixture is a fake Zendesk served over a real socket, and a client that never reuses
// connections.
type fixture struct {
	sup    *zendesk.Server
	url    string
	client *http.Client
	clock  *clock
}

func setup(t *testing.T, cfg zendesk.Config) fixture {
	t.Helper()
	c := newClock()
	if cfg.Now == nil {
		cfg.Now = c.Now
	}
	sup := zendesk.New(cfg)
	ts := httptest.NewServer(sup)
	t.Cleanup(func() {
		ts.Close()
		sup.Close()
	})
	return fixture{
		sup:    sup,
		url:    ts.URL,
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second},
		clock:  c,
	}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) lookup() string { return r.header.Get("X-Idempotency-Lookup") }

func (r reply) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

func (r reply) ticket(t *testing.T) map[string]any {
	t.Helper()
	var v struct {
		Ticket map[string]any `json:"ticket"`
		Audit  map[string]any `json:"audit"`
	}
	r.decode(t, &v)
	if v.Ticket == nil {
		t.Fatalf("no ticket in %s", r.body)
	}
	return v.Ticket
}

func (r reply) errorName(t *testing.T) string {
	t.Helper()
	var v struct {
		Error string `json:"error"`
	}
	r.decode(t, &v)
	return v.Error
}

var oauth = "Bearer " + zendesk.DefaultOAuthToken

func (f fixture) send(method, path, auth, key, body string) (reply, error) {
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Accept", "application/json")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func (f fixture) create(key, body string) (reply, error) {
	return f.send(http.MethodPost, "/api/v2/tickets.json", oauth, key, body)
}

func (f fixture) mustCreate(t *testing.T, key, body string) reply {
	t.Helper()
	r, err := f.create(key, body)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return r
}

func (f fixture) get(t *testing.T, path string) reply {
	t.Helper()
	r, err := f.send(http.MethodGet, path, oauth, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ticketBody is a create request for a ticket whose external_id is reference.
func ticketBody(reference, subject string) string {
	return fmt.Sprintf(`{"ticket":{"subject":%q,"comment":{"body":"The printer is on fire."},"external_id":%q}}`, subject, reference)
}

func basic(user, pass string) string {
	r, _ := http.NewRequest(http.MethodGet, "http://x", nil)
	r.SetBasicAuth(user, pass)
	return r.Header.Get("Authorization")
}

func TestCredentialsAreRequiredAndAnsweredAsZendeskDoes(t *testing.T) {
	t.Parallel()
	f := setup(t, zendesk.Config{})
	tests := []struct {
		name string
		auth string
		want int
	}{
		{"no credential", "", http.StatusUnauthorized},
		{"OAuth bearer token", oauth, http.StatusOK},
		{"wrong bearer token", "Bearer nope", http.StatusUnauthorized},
		{"API token", basic(zendesk.DefaultEmail+"/token", zendesk.DefaultAPIToken), http.StatusOK},
		{"API token without /token", basic(zendesk.DefaultEmail, zendesk.DefaultAPIToken), http.StatusUnauthorized},
		{"wrong API token", basic(zendesk.DefaultEmail+"/token", "nope"), http.StatusUnauthorized},
		{"API token as a bearer token", "Bearer " + zendesk.DefaultAPIToken, http.StatusUnauthorized},
	}
	t.Run("each", func(t *testing.T) { // returns once its parallel subtests are done
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				got, err := f.send(http.MethodGet, "/api/v2/tickets.json", tt.auth, "", "")
				if err != nil {
					t.Fatal(err)
				}
				if got.status != tt.want {
					t.Fatalf("status = %d, want %d (%s)", got.status, tt.want, got.body)
				}
				if tt.want == http.StatusUnauthorized && got.errorName(t) != "Couldn't authenticate you" {
					t.Errorf("401 body %s", got.body)
				}
			})
		}
	})
	var withAuth int
	for _, r := range f.sup.Requests() {
		if r.Header.Get("Authorization") != "" {
			withAuth++
		}
	}
	if withAuth != len(tests)-1 {
		t.Errorf("Requests() recorded %d requests with an Authorization header, want %d", withAuth, len(tests)-1)
	}
}

func TestCreateAnswers201WithTheTicket(t *testing.T) {
	t.Parallel()
	f := setup(t, zendesk.Config{})
	got := f.mustCreate(t, "key-1", ticketBody("al_op-1", "Printer on fire"))
	if got.status != http.StatusCreated || got.lookup() != "miss" {
		t.Fatalf("create: %d lookup=%q %s", got.status, got.lookup(), got.body)
	}
	tk := got.ticket(t)
	id, ok := tk["id"].(float64)
	if !ok || id < 1 || tk["external_id"] != "al_op-1" || tk["subject"] != "Printer on fire" || tk["status"] != "new" {
		t.Errorf("ticket %s", got.body)
	}
	if loc := got.header.Get("Location"); loc != tk["url"] || !strings.HasSuffix(loc, fmt.Sprintf("/api/v2/tickets/%d.json", int64(id))) {
		t.Errorf("Location %q, url %v", loc, tk["url"])
	}
	shown := f.get(t, fmt.Sprintf("/api/v2/tickets/%d.json", int64(id)))
	if shown.status != http.StatusOK || shown.ticket(t)["id"] != tk["id"] {
		t.Errorf("show: %d %s", shown.status, shown.body)
	}
	if missing := f.get(t, "/api/v2/tickets/999"); missing.status != http.StatusNotFound || missing.errorName(t) != "RecordNotFound" {
		t.Errorf("missing ticket: %d %s", missing.status, missing.body)
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		second     string
		wantStatus int
		wantLookup string
		wantError  string
	}{
		{"same body replays", ticketBody("al_op-2", "Printer"), http.StatusCreated, "hit", ""},
		{"same body in another key order replays",
			`{"ticket":{"external_id":"al_op-2","comment":{"body":"The printer is on fire."},"subject":"Printer"}}`,
			http.StatusCreated, "hit", ""},
		{"another body is refused", ticketBody("al_op-2", "Scanner"), http.StatusBadRequest, "", "IdempotentRequestError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, zendesk.Config{})
			first := f.mustCreate(t, "key-2", ticketBody("al_op-2", "Printer"))
			second := f.mustCreate(t, "key-2", tt.second)
			if second.status != tt.wantStatus || second.lookup() != tt.wantLookup {
				t.Fatalf("second: %d lookup=%q %s", second.status, second.lookup(), second.body)
			}
			if tt.wantError != "" && second.errorName(t) != tt.wantError {
				t.Errorf("error %s, want %s", second.body, tt.wantError)
			}
			if tt.wantStatus == http.StatusCreated && string(second.body) != string(first.body) {
				t.Errorf("replay differs:\n%s\n%s", first.body, second.body)
			}
			if n := f.sup.Effects("al_op-2"); n != 1 {
				t.Errorf("Effects = %d, want 1", n)
			}
		})
	}
}

func TestAKeyExpiresAfterTwoHours(t *testing.T) {
	t.Parallel()
	f := setup(t, zendesk.Config{})
	f.mustCreate(t, "key-3", ticketBody("al_op-3", "Printer"))
	f.clock.Advance(2*time.Hour - time.Second)
	if got := f.mustCreate(t, "key-3", ticketBody("al_op-3", "Printer")); got.lookup() != "hit" {
		t.Fatalf("within two hours: lookup %q", got.lookup())
	}
	f.clock.Advance(time.Second)
	if got := f.mustCreate(t, "key-3", ticketBody("al_op-3", "Printer")); got.lookup() != "miss" || got.status != http.StatusCreated {
		t.Fatalf("after two hours: %d lookup %q", got.status, got.lookup())
	}
	if n := f.sup.Effects("al_op-3"); n != 2 {
		t.Errorf("Effects = %d, want 2: a key sent two hours later creates a new ticket", n)
	}
}

func TestLookupByExternalIDAfterTheLag(t *testing.T) {
	t.Parallel()
	f := setup(t, zendesk.Config{LookupLag: 10 * time.Second})
	f.mustCreate(t, "", ticketBody("al_op-4", "Printer"))
	f.mustCreate(t, "", ticketBody("al_op-5", "Printer"))
	tests := []struct {
		name    string
		advance time.Duration
		ref     string
		want    int
	}{
		{"at once", 0, "al_op-4", 0},
		{"before the lag", 9 * time.Second, "al_op-4", 0},
		{"after the lag", time.Second, "al_op-4", 1},
		{"exact match only", 0, "AL_OP-4", 0},
		{"another reference", 0, "al_op-6", 0},
	}
	for _, tt := range tests { // sequential: the clock moves
		f.clock.Advance(tt.advance)
		got := f.get(t, "/api/v2/tickets.json?external_id="+url.QueryEscape(tt.ref))
		var v struct {
			Tickets []map[string]any `json:"tickets"`
			Count   int              `json:"count"`
		}
		got.decode(t, &v)
		if got.status != http.StatusOK || len(v.Tickets) != tt.want || v.Count != tt.want {
			t.Errorf("%s: %d tickets (count %d), want %d: %s", tt.name, len(v.Tickets), v.Count, tt.want, got.body)
		}
	}
	// External ids need not be unique: a duplicate is listed too.
	f.mustCreate(t, "", ticketBody("al_op-4", "Printer again"))
	f.clock.Advance(10 * time.Second)
	var v struct {
		Tickets []map[string]any `json:"tickets"`
	}
	f.get(t, "/api/v2/tickets?external_id=al_op-4").decode(t, &v)
	if len(v.Tickets) != 2 {
		t.Errorf("duplicates: %d tickets listed, want 2", len(v.Tickets))
	}
}

func TestLostAndRefusedResponses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		fault       zendesk.Fault
		wantErr     bool
		wantStatus  int
		wantEffects int
		retryStatus int
		retryLookup string
	}{
		{"drop after commit", zendesk.Fault{Kind: zendesk.DropAfterCommit}, true, 0, 1, http.StatusCreated, "hit"},
		{"500 after commit", zendesk.Fault{Kind: zendesk.Error500AfterCommit}, false, http.StatusInternalServerError, 1, http.StatusInternalServerError, "hit"},
		{"drop before commit", zendesk.Fault{Kind: zendesk.DropBeforeCommit}, true, 0, 0, http.StatusCreated, "miss"},
		{"429", zendesk.Fault{Kind: zendesk.RateLimited, RetryAfter: 30 * time.Second}, false, http.StatusTooManyRequests, 0, http.StatusCreated, "miss"},
		{"503", zendesk.Fault{Kind: zendesk.Unavailable}, false, http.StatusServiceUnavailable, 0, http.StatusCreated, "miss"},
		{"key in use", zendesk.Fault{Kind: zendesk.KeyInUse}, false, http.StatusConflict, 0, http.StatusCreated, "miss"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, zendesk.Config{})
			f.sup.Fail(tt.fault)
			got, err := f.create("key-6", ticketBody("al_op-6", "Printer"))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tt.wantErr)
			}
			if !tt.wantErr && got.status != tt.wantStatus {
				t.Fatalf("status %d, want %d (%s)", got.status, tt.wantStatus, got.body)
			}
			if tt.fault.Kind == zendesk.RateLimited && (got.header.Get("Retry-After") != "30" || !strings.HasPrefix(got.header.Get("Content-Type"), "text/plain")) {
				t.Errorf("429 headers %v", got.header)
			}
			if tt.fault.Kind == zendesk.Unavailable && got.header.Get("Retry-After") != "1" {
				t.Errorf("503 Retry-After %q, want 1", got.header.Get("Retry-After"))
			}
			if n := f.sup.Effects("al_op-6"); n != tt.wantEffects {
				t.Fatalf("Effects = %d, want %d", n, tt.wantEffects)
			}
			retry := f.mustCreate(t, "key-6", ticketBody("al_op-6", "Printer"))
			if retry.status != tt.retryStatus || retry.lookup() != tt.retryLookup {
				t.Errorf("resend: %d lookup=%q, want %d %q", retry.status, retry.lookup(), tt.retryStatus, tt.retryLookup)
			}
			if n := f.sup.Effects("al_op-6"); n != 1 {
				t.Errorf("Effects after the resend = %d, want 1", n)
			}
		})
	}
}

func TestConcurrentRepeatWhileTheFirstIsInFlight(t *testing.T) {
	t.Parallel()
	f := setup(t, zendesk.Config{})
	f.sup.Fail(zendesk.Fault{Kind: zendesk.DelayAfterCommit, Delay: 300 * time.Millisecond})
	done := make(chan reply, 1)
	go func() {
		r, _ := f.create("key-7", ticketBody("al_op-7", "Printer"))
		done <- r
	}()
	waitFor(t, func() bool { return f.sup.Effects("al_op-7") == 1 })
	if during := f.mustCreate(t, "key-7", ticketBody("al_op-7", "Printer")); during.status != http.StatusConflict {
		t.Fatalf("repeat while in flight: %d %s, want 409", during.status, during.body)
	}
	first := <-done
	after := f.mustCreate(t, "key-7", ticketBody("al_op-7", "Printer"))
	if after.lookup() != "hit" || string(after.body) != string(first.body) {
		t.Errorf("repeat afterwards: lookup %q", after.lookup())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantError  string
	}{
		{"no comment", `{"ticket":{"subject":"x","external_id":"al_op-8"}}`, http.StatusUnprocessableEntity, "RecordInvalid"},
		{"blank comment", `{"ticket":{"comment":{"body":"  "},"external_id":"al_op-8"}}`, http.StatusUnprocessableEntity, "RecordInvalid"},
		{"bad priority", `{"ticket":{"comment":{"body":"b"},"priority":"asap","external_id":"al_op-8"}}`, http.StatusUnprocessableEntity, "RecordInvalid"},
		{"no ticket object", `{"subject":"x"}`, http.StatusBadRequest, "InvalidParams"},
		{"not JSON", `subject=x`, http.StatusBadRequest, "InvalidJSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, zendesk.Config{})
			got := f.mustCreate(t, "key-8", tt.body)
			if got.status != tt.wantStatus || got.errorName(t) != tt.wantError {
				t.Fatalf("%d %s, want %d %s", got.status, got.body, tt.wantStatus, tt.wantError)
			}
			// A refused request stores nothing under its key.
			if ok := f.mustCreate(t, "key-8", ticketBody("al_op-8", "Printer")); ok.status != http.StatusCreated || ok.lookup() != "miss" {
				t.Errorf("valid request with the same key: %d lookup=%q", ok.status, ok.lookup())
			}
		})
	}
}

// received is one webhook request as the receiver saw it.
type received struct {
	header http.Header
	body   []byte
}

func receiver(t *testing.T, answers ...int) (string, <-chan received) {
	t.Helper()
	ch := make(chan received, 16)
	var mu sync.Mutex
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ch <- received{header: r.Header.Clone(), body: body}
		mu.Lock()
		status := http.StatusOK
		if len(answers) > 0 {
			status, answers = answers[0], answers[1:]
		}
		mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/hooks/zendesk", ch
}

func next(t *testing.T, ch <-chan received) received {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no webhook within 5s")
		return received{}
	}
}

const secret = "dGhlLXplbmRlc2std2ViaG9vay1zaWduaW5nLXNlY3JldA"

func TestWebhookSignatureVerifiesWithAnIndependentComputation(t *testing.T) {
	t.Parallel()
	hook, got := receiver(t, http.StatusServiceUnavailable)
	f := setup(t, zendesk.Config{Webhook: &zendesk.Webhook{URL: hook, Secret: secret, Backoff: 10 * time.Millisecond}})
	tk := f.mustCreate(t, "", ticketBody("al_op-9", "Printer")).ticket(t)
	for attempt := 1; attempt <= 2; attempt++ { // a 503 is retried
		r := next(t, got)
		ts := r.header.Get("X-Zendesk-Webhook-Signature-Timestamp")
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts))
		mac.Write(r.body)
		want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
		if sig := r.header.Get("X-Zendesk-Webhook-Signature"); !hmac.Equal([]byte(sig), []byte(want)) {
			t.Fatalf("attempt %d: signature %q, want base64(HMAC-SHA256(timestamp+body)) = %q", attempt, sig, want)
		}
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Errorf("timestamp %q: %v", ts, err)
		}
		var ev zendesk.Event
		if err := json.Unmarshal(r.body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != "zen:event-type:ticket.created" || ev.Detail.ExternalID == nil || *ev.Detail.ExternalID != "al_op-9" ||
			ev.Detail.ID != fmt.Sprint(tk["id"]) || ev.Subject != "zen:ticket:"+fmt.Sprint(tk["id"]) || ev.ID == "" {
			t.Errorf("attempt %d: event %s", attempt, r.body)
		}
	}
	waitFor(t, func() bool { return len(f.sup.Deliveries()) == 2 })
	if ds := f.sup.Deliveries(); ds[0].Status != http.StatusServiceUnavailable || ds[1].Status != http.StatusOK || ds[0].EventID != ds[1].EventID {
		t.Errorf("deliveries %+v", ds)
	}
}
