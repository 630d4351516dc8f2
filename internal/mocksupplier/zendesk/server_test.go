package zendesk_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/internal/faketest"
	"github.com/actledger/actledger/internal/mocksupplier/zendesk"
)

// fixture is a fake Zendesk served over a real socket, and a client that never reuses
// connections.
type fixture struct {
	sup    *zendesk.Server
	url    string
	client *http.Client
	clock  *faketest.Clock
}

func setup(t *testing.T, cfg zendesk.Config) fixture {
	t.Helper()
	c := faketest.NewClock(faketest.Start)
	if cfg.Now == nil {
		cfg.Now = c.Now
	}
	sup := zendesk.New(cfg)
	t.Cleanup(sup.Close)
	return fixture{sup: sup, url: faketest.Serve(t, sup), client: faketest.Client(), clock: c}
}

// reply is what a client saw, read as Zendesk answers.
type reply struct{ faketest.Reply }

func (r reply) lookup() string { return r.Header.Get("X-Idempotency-Lookup") }

func (r reply) ticket(t *testing.T) map[string]any {
	t.Helper()
	var v struct {
		Ticket map[string]any `json:"ticket"`
		Audit  map[string]any `json:"audit"`
	}
	r.Decode(t, &v)
	if v.Ticket == nil {
		t.Fatalf("no ticket in %s", r.Body)
	}
	return v.Ticket
}

func (r reply) errorName(t *testing.T) string {
	t.Helper()
	var v struct {
		Error string `json:"error"`
	}
	r.Decode(t, &v)
	return v.Error
}

var oauth = "Bearer " + zendesk.DefaultOAuthToken

func (f fixture) send(method, path, auth, key, body string) (reply, error) {
	r, err := faketest.Do(f.client, method, f.url+path, body, "Accept", "application/json",
		"Content-Type", faketest.JSON(body), "Authorization", auth, "Idempotency-Key", key)
	return reply{r}, err
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
				if got.Status != tt.want {
					t.Fatalf("status = %d, want %d (%s)", got.Status, tt.want, got.Body)
				}
				if tt.want == http.StatusUnauthorized && got.errorName(t) != "Couldn't authenticate you" {
					t.Errorf("401 body %s", got.Body)
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
	if got.Status != http.StatusCreated || got.lookup() != "miss" {
		t.Fatalf("create: %d lookup=%q %s", got.Status, got.lookup(), got.Body)
	}
	tk := got.ticket(t)
	id, ok := tk["id"].(float64)
	if !ok || id < 1 || tk["external_id"] != "al_op-1" || tk["subject"] != "Printer on fire" || tk["status"] != "new" {
		t.Errorf("ticket %s", got.Body)
	}
	if loc := got.Header.Get("Location"); loc != tk["url"] || !strings.HasSuffix(loc, fmt.Sprintf("/api/v2/tickets/%d.json", int64(id))) {
		t.Errorf("Location %q, url %v", loc, tk["url"])
	}
	shown := f.get(t, fmt.Sprintf("/api/v2/tickets/%d.json", int64(id)))
	if shown.Status != http.StatusOK || shown.ticket(t)["id"] != tk["id"] {
		t.Errorf("show: %d %s", shown.Status, shown.Body)
	}
	if missing := f.get(t, "/api/v2/tickets/999"); missing.Status != http.StatusNotFound || missing.errorName(t) != "RecordNotFound" {
		t.Errorf("missing ticket: %d %s", missing.Status, missing.Body)
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
			if second.Status != tt.wantStatus || second.lookup() != tt.wantLookup {
				t.Fatalf("second: %d lookup=%q %s", second.Status, second.lookup(), second.Body)
			}
			if tt.wantError != "" && second.errorName(t) != tt.wantError {
				t.Errorf("error %s, want %s", second.Body, tt.wantError)
			}
			if tt.wantStatus == http.StatusCreated && string(second.Body) != string(first.Body) {
				t.Errorf("replay differs:\n%s\n%s", first.Body, second.Body)
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
	if got := f.mustCreate(t, "key-3", ticketBody("al_op-3", "Printer")); got.lookup() != "miss" || got.Status != http.StatusCreated {
		t.Fatalf("after two hours: %d lookup %q", got.Status, got.lookup())
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
		got.Decode(t, &v)
		if got.Status != http.StatusOK || len(v.Tickets) != tt.want || v.Count != tt.want {
			t.Errorf("%s: %d tickets (count %d), want %d: %s", tt.name, len(v.Tickets), v.Count, tt.want, got.Body)
		}
	}
	// External ids need not be unique: a duplicate is listed too.
	f.mustCreate(t, "", ticketBody("al_op-4", "Printer again"))
	f.clock.Advance(10 * time.Second)
	var v struct {
		Tickets []map[string]any `json:"tickets"`
	}
	f.get(t, "/api/v2/tickets?external_id=al_op-4").Decode(t, &v)
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
			if !tt.wantErr && got.Status != tt.wantStatus {
				t.Fatalf("status %d, want %d (%s)", got.Status, tt.wantStatus, got.Body)
			}
			if tt.fault.Kind == zendesk.RateLimited && (got.Header.Get("Retry-After") != "30" || !strings.HasPrefix(got.Header.Get("Content-Type"), "text/plain")) {
				t.Errorf("429 headers %v", got.Header)
			}
			if tt.fault.Kind == zendesk.Unavailable && got.Header.Get("Retry-After") != "1" {
				t.Errorf("503 Retry-After %q, want 1", got.Header.Get("Retry-After"))
			}
			if n := f.sup.Effects("al_op-6"); n != tt.wantEffects {
				t.Fatalf("Effects = %d, want %d", n, tt.wantEffects)
			}
			retry := f.mustCreate(t, "key-6", ticketBody("al_op-6", "Printer"))
			if retry.Status != tt.retryStatus || retry.lookup() != tt.retryLookup {
				t.Errorf("resend: %d lookup=%q, want %d %q", retry.Status, retry.lookup(), tt.retryStatus, tt.retryLookup)
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
	faketest.WaitFor(t, 5*time.Second, func() bool { return f.sup.Effects("al_op-7") == 1 })
	if during := f.mustCreate(t, "key-7", ticketBody("al_op-7", "Printer")); during.Status != http.StatusConflict {
		t.Fatalf("repeat while in flight: %d %s, want 409", during.Status, during.Body)
	}
	first := <-done
	after := f.mustCreate(t, "key-7", ticketBody("al_op-7", "Printer"))
	if after.lookup() != "hit" || string(after.Body) != string(first.Body) {
		t.Errorf("repeat afterwards: lookup %q", after.lookup())
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
			if got.Status != tt.wantStatus || got.errorName(t) != tt.wantError {
				t.Fatalf("%d %s, want %d %s", got.Status, got.Body, tt.wantStatus, tt.wantError)
			}
			// A refused request stores nothing under its key.
			if ok := f.mustCreate(t, "key-8", ticketBody("al_op-8", "Printer")); ok.Status != http.StatusCreated || ok.lookup() != "miss" {
				t.Errorf("valid request with the same key: %d lookup=%q", ok.Status, ok.lookup())
			}
		})
	}
}

const secret = "dGhlLXplbmRlc2std2ViaG9vay1zaWduaW5nLXNlY3JldA"

func TestWebhookSignatureVerifiesWithAnIndependentComputation(t *testing.T) {
	t.Parallel()
	hook, got := faketest.Receiver(t, http.StatusOK, http.StatusServiceUnavailable)
	f := setup(t, zendesk.Config{Webhook: &zendesk.Webhook{URL: hook, Secret: secret, Backoff: 10 * time.Millisecond}})
	tk := f.mustCreate(t, "", ticketBody("al_op-9", "Printer")).ticket(t)
	for attempt := 1; attempt <= 2; attempt++ { // a 503 is retried
		r := faketest.Next(t, got)
		ts := r.Header.Get("X-Zendesk-Webhook-Signature-Timestamp")
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts))
		mac.Write(r.Body)
		want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
		if sig := r.Header.Get("X-Zendesk-Webhook-Signature"); !hmac.Equal([]byte(sig), []byte(want)) {
			t.Fatalf("attempt %d: signature %q, want base64(HMAC-SHA256(timestamp+body)) = %q", attempt, sig, want)
		}
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Errorf("timestamp %q: %v", ts, err)
		}
		var ev zendesk.Event
		if err := json.Unmarshal(r.Body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != "zen:event-type:ticket.created" || ev.Detail.ExternalID == nil || *ev.Detail.ExternalID != "al_op-9" ||
			ev.Detail.ID != fmt.Sprint(tk["id"]) || ev.Subject != "zen:ticket:"+fmt.Sprint(tk["id"]) || ev.ID == "" {
			t.Errorf("attempt %d: event %s", attempt, r.Body)
		}
	}
	faketest.WaitFor(t, 5*time.Second, func() bool { return len(f.sup.Deliveries()) == 2 })
	if ds := f.sup.Deliveries(); ds[0].Status != http.StatusServiceUnavailable || ds[1].Status != http.StatusOK || ds[0].EventID != ds[1].EventID {
		t.Errorf("deliveries %+v", ds)
	}
}

// The cursor-based incremental export lists the tickets changed since
// start_time a page at a time, after_cursor going on until end_of_stream,
// and leaves out what changed in the minute before the request.
func TestIncrementalExportPagesByCursorAndLeavesOutTheLastMinute(t *testing.T) {
	t.Parallel()
	f := setup(t, zendesk.Config{})
	start := f.clock.Now().Unix()
	for i := range 3 {
		f.mustCreate(t, fmt.Sprintf("k-%d", i), ticketBody(fmt.Sprintf("al_%d", i), "Printer"))
	}
	f.clock.Advance(2 * time.Minute)
	f.mustCreate(t, "k-late", ticketBody("al_late", "Printer"))
	type page struct {
		Tickets []struct {
			ExternalID string `json:"external_id"`
		} `json:"tickets"`
		AfterCursor string `json:"after_cursor"`
		EndOfStream bool   `json:"end_of_stream"`
	}
	var first, second page
	f.get(t, fmt.Sprintf("/api/v2/incremental/tickets/cursor.json?start_time=%d&per_page=2", start)).Decode(t, &first)
	if len(first.Tickets) != 2 || first.EndOfStream || first.AfterCursor == "" {
		t.Fatalf("first page = %+v, want two tickets, a cursor and more to come", first)
	}
	f.get(t, "/api/v2/incremental/tickets/cursor.json?per_page=2&cursor="+first.AfterCursor).Decode(t, &second)
	if len(second.Tickets) != 1 || second.Tickets[0].ExternalID != "al_2" || !second.EndOfStream {
		t.Fatalf("second page = %+v, want al_2 alone and the end of the stream (al_late is under a minute old)", second)
	}
	if r := f.get(t, fmt.Sprintf("/api/v2/incremental/tickets/cursor.json?start_time=%d", f.clock.Now().Unix())); r.Status != http.StatusBadRequest {
		t.Fatalf("a start_time of now answered %d, want 400", r.Status)
	}
}
