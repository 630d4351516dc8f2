package postmark_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/internal/faketest"
	"github.com/actledger/actledger/internal/mocksupplier/postmark"
)

// fixture is a fake Postmark served over a real socket, and a client that never reuses
// connections.
type fixture struct {
	pm     *postmark.Server
	url    string
	clock  *faketest.Clock
	client *http.Client
}

func setup(t *testing.T, cfg postmark.Config) fixture {
	t.Helper()
	c := faketest.NewClock(faketest.Start)
	if cfg.Now == nil {
		cfg.Now = c.Now
	}
	pm := postmark.New(cfg)
	return fixture{pm: pm, url: faketest.Serve(t, pm), clock: c, client: faketest.Client()}
}

// reply is what a client saw, read as Postmark answers.
type reply struct{ faketest.Reply }

type apiError struct {
	ErrorCode int    `json:"ErrorCode"`
	Message   string `json:"Message"`
}

func (r reply) apiError(t *testing.T) apiError {
	t.Helper()
	var e apiError
	r.Decode(t, &e)
	return e
}

// do sends one request with the given headers.
func (f fixture) do(method, path string, header map[string]string, body string) (reply, error) {
	pairs := []string{"Accept", "application/json", "Content-Type", faketest.JSON(body)}
	for k, v := range header {
		pairs = append(pairs, k, v)
	}
	r, err := faketest.Do(f.client, method, f.url+path, body, pairs...)
	return reply{r}, err
}

var serverToken = map[string]string{"X-Postmark-Server-Token": postmark.DefaultServerToken}

func (f fixture) must(t *testing.T, method, path, body string) reply {
	t.Helper()
	r, err := f.do(method, path, serverToken, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// emailBody is a send body carrying reference the way actledger's recipe does.
func emailBody(to, reference string) string {
	b, _ := json.Marshal(map[string]any{
		"From":          "Acme Support <support@acme.example>",
		"To":            to,
		"Subject":       "Your order 37 has shipped",
		"TextBody":      "It is on its way.",
		"MessageStream": "outbound",
		"Metadata":      map[string]string{"actledger_reference": reference},
	})
	return string(b)
}

type sent struct {
	To          string `json:"To"`
	SubmittedAt string `json:"SubmittedAt"`
	MessageID   string `json:"MessageID"`
	ErrorCode   int    `json:"ErrorCode"`
	Message     string `json:"Message"`
}

func (f fixture) send(t *testing.T, body string) sent {
	t.Helper()
	r := f.must(t, http.MethodPost, "/email", body)
	if r.Status != http.StatusOK {
		t.Fatalf("send: status %d, body %s", r.Status, r.Body)
	}
	var s sent
	r.Decode(t, &s)
	return s
}

type searchResult struct {
	TotalCount int `json:"TotalCount"`
	Messages   []struct {
		MessageID string            `json:"MessageID"`
		Status    string            `json:"Status"`
		Metadata  map[string]string `json:"Metadata"`
		To        []struct {
			Email string `json:"Email"`
		} `json:"To"`
	} `json:"Messages"`
}

// search runs the recipe's lookup for reference.
func (f fixture) search(t *testing.T, reference string) searchResult {
	t.Helper()
	r := f.must(t, http.MethodGet, "/messages/outbound?count=10&offset=0&metadata_actledger_reference="+url.QueryEscape(reference), "")
	if r.Status != http.StatusOK {
		t.Fatalf("search %s: status %d, body %s", reference, r.Status, r.Body)
	}
	var res searchResult
	r.Decode(t, &res)
	return res
}

func TestSendAnswersAsPostmarkDoes(t *testing.T) {
	t.Parallel()
	f := setup(t, postmark.Config{})
	s := f.send(t, emailBody("jane@example.com", "al_1"))

	if s.To != "jane@example.com" || s.ErrorCode != 0 || s.Message != "OK" || s.MessageID == "" {
		t.Errorf("answer = %+v, want To, a MessageID, ErrorCode 0 and Message OK", s)
	}
	if at, err := time.Parse(time.RFC3339Nano, s.SubmittedAt); err != nil || !at.Equal(f.clock.Now()) {
		t.Errorf("SubmittedAt = %q (%v), want the clock's time with a zone offset", s.SubmittedAt, err)
	}
	if got := f.pm.Effects("al_1"); got != 1 {
		t.Errorf("Effects = %d, want 1", got)
	}
	ms := f.pm.Messages()
	if len(ms) != 1 || ms[0].MessageID != s.MessageID || ms[0].MessageStream != "outbound" || ms[0].Metadata["actledger_reference"] != "al_1" {
		t.Errorf("Messages() = %+v, want the message just sent", ms)
	}
}

func TestSendRequiresTheServerToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		header  map[string]string
		wantOK  bool
		wantMsg string
	}{
		{"server token", serverToken, true, ""},
		{"value in another case", map[string]string{"X-Postmark-Server-Token": strings.ToUpper(postmark.DefaultServerToken)}, true, ""},
		{"no token", nil, false, "Request does not contain a valid Server token."},
		{"wrong token", map[string]string{"X-Postmark-Server-Token": "nope"}, false, "Request does not contain a valid Server token."},
		{"account token is not a server token", map[string]string{"X-Postmark-Account-Token": postmark.DefaultServerToken}, false, "Request does not contain a valid Server token."},
		{"both tokens", map[string]string{
			"X-Postmark-Server-Token":  postmark.DefaultServerToken,
			"X-Postmark-Account-Token": "acct",
		}, false, "Please do not include Account API Token for Server API Token calls."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, postmark.Config{})
			for _, path := range []string{"/email", "/messages/outbound?count=1&offset=0"} {
				method, body := http.MethodPost, emailBody("jane@example.com", "al_1")
				if path != "/email" {
					method, body = http.MethodGet, ""
				}
				r, err := f.do(method, path, tc.header, body)
				if err != nil {
					t.Fatal(err)
				}
				if tc.wantOK {
					if r.Status != http.StatusOK {
						t.Errorf("%s: status %d, want 200 (body %s)", path, r.Status, r.Body)
					}
					continue
				}
				if e := r.apiError(t); r.Status != http.StatusUnauthorized || e.ErrorCode != postmark.ErrBadToken || e.Message != tc.wantMsg {
					t.Errorf("%s: status %d, %+v; want 401, ErrorCode 10, %q", path, r.Status, e, tc.wantMsg)
				}
			}
			want := 0
			if tc.wantOK {
				want = 1
			}
			if got := f.pm.Effects("al_1"); got != want {
				t.Errorf("Effects = %d, want %d", got, want)
			}
		})
	}
}

func TestSendRefusesWhatPostmarkRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		body     string
		wantCode int
	}{
		{"inactive recipient", emailBody("bounced@example.com", "al_1"), postmark.ErrInactiveRecipient},
		{"inactive among several", emailBody("jane@example.com, BOUNCED@example.com", "al_1"), postmark.ErrInactiveRecipient},
		{"no body", `{"From":"support@acme.example","To":"jane@example.com","Subject":"s","Metadata":{"r":"al_1"}}`, postmark.ErrInvalidEmailRequest},
		{"bad address", emailBody("jane@@example", "al_1"), postmark.ErrInvalidEmailRequest},
		{"no recipient", emailBody("", "al_1"), postmark.ErrInvalidEmailRequest},
		{"too many recipients", emailBody(strings.Repeat("a@example.com,", 51), "al_1"), postmark.ErrInvalidEmailRequest},
		{"no From", `{"To":"jane@example.com","TextBody":"t","Metadata":{"r":"al_1"}}`, postmark.ErrInvalidEmailRequest},
		{"not JSON", `{"From":`, postmark.ErrInvalidJSON},
		{"wrong shape", `{"From":"support@acme.example","To":["jane@example.com"],"TextBody":"t"}`, postmark.ErrIncompatibleJSON},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, postmark.Config{InactiveRecipients: []string{"bounced@example.com"}})
			r := f.must(t, http.MethodPost, "/email", tc.body)
			if e := r.apiError(t); r.Status != http.StatusUnprocessableEntity || e.ErrorCode != tc.wantCode {
				t.Errorf("status %d, %+v; want 422 with ErrorCode %d", r.Status, e, tc.wantCode)
			}
			if got := len(f.pm.Messages()); got != 0 {
				t.Errorf("%d messages accepted, want none", got)
			}
		})
	}
}

func TestSearchLagsBehindTheSend(t *testing.T) {
	t.Parallel()
	f := setup(t, postmark.Config{LookupLag: 30 * time.Second})
	s := f.send(t, emailBody("jane@example.com", "al_lag"))

	if got := f.search(t, "al_lag"); got.TotalCount != 0 || len(got.Messages) != 0 {
		t.Errorf("search right after the send = %+v, want nothing yet", got)
	}
	f.clock.Advance(29 * time.Second)
	if got := f.search(t, "al_lag").TotalCount; got != 0 {
		t.Errorf("search 29s after the send found %d, want 0", got)
	}
	f.clock.Advance(time.Second)
	got := f.search(t, "al_lag")
	if got.TotalCount != 1 || len(got.Messages) != 1 || got.Messages[0].MessageID != s.MessageID {
		t.Fatalf("search once the lag passed = %+v, want %s", got, s.MessageID)
	}
	if m := got.Messages[0]; m.Status != "Sent" || m.Metadata["actledger_reference"] != "al_lag" || len(m.To) != 1 || m.To[0].Email != "jane@example.com" {
		t.Errorf("search item = %+v, want the sent message with its metadata and recipient", m)
	}
}

func TestSearchFilters(t *testing.T) {
	t.Parallel()
	f := setup(t, postmark.Config{})
	f.send(t, emailBody("jane@example.com", "al_a"))
	f.clock.Advance(time.Minute)
	f.send(t, emailBody("joe@example.com", "al_b"))

	tests := []struct {
		name  string
		query string
		want  int
	}{
		{"metadata", "metadata_actledger_reference=al_a", 1},
		{"metadata key in another case", "metadata_ACTLEDGER_REFERENCE=al_b", 1},
		{"metadata value is exact", "metadata_actledger_reference=al_", 0},
		{"recipient", "recipient=joe@example.com", 1},
		{"stream", "messagestream=outbound", 2},
		{"other stream", "messagestream=broadcast", 0},
		{"status sent", "status=sent", 2},
		{"status queued", "status=queued", 0},
		{"no filter", "", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := f.must(t, http.MethodGet, "/messages/outbound?count=10&offset=0&"+tc.query, "")
			var res searchResult
			r.Decode(t, &res)
			if r.Status != http.StatusOK || res.TotalCount != tc.want || len(res.Messages) != tc.want {
				t.Errorf("%s: status %d, TotalCount %d, %d messages; want 200 and %d", tc.query, r.Status, res.TotalCount, len(res.Messages), tc.want)
			}
		})
	}
	var res searchResult
	f.must(t, http.MethodGet, "/messages/outbound?count=1&offset=0", "").Decode(t, &res)
	if res.TotalCount != 2 || len(res.Messages) != 1 || res.Messages[0].Metadata["actledger_reference"] != "al_b" {
		t.Errorf("count=1: %+v, want TotalCount 2 and the newest message only", res)
	}
}

func TestSearchRefusesWhatItCannotAnswer(t *testing.T) {
	t.Parallel()
	f := setup(t, postmark.Config{})
	for _, q := range []string{
		"offset=0",              // no count
		"count=10",              // no offset
		"count=501&offset=0",    // count over 500
		"count=500&offset=9600", // count + offset over 10,000
		"count=10&offset=0&metadata_a=1&metadata_b=2", // one metadata field at a time
		"count=10&offset=0&fromdate=yesterday",
	} {
		r := f.must(t, http.MethodGet, "/messages/outbound?"+q, "")
		if r.Status != http.StatusUnprocessableEntity {
			t.Errorf("%s: status %d, want 422 (body %s)", q, r.Status, r.Body)
		}
	}
}

func TestDuplicatesReallyDuplicate(t *testing.T) {
	t.Parallel()
	f := setup(t, postmark.Config{})
	first := f.send(t, emailBody("jane@example.com", "al_dup"))
	second := f.send(t, emailBody("jane@example.com", "al_dup"))

	if first.MessageID == second.MessageID {
		t.Errorf("two sends answered the same MessageID %s: Postmark has no idempotency key", first.MessageID)
	}
	if got := f.pm.Effects("al_dup"); got != 2 {
		t.Errorf("Effects = %d, want 2: the recipient got two emails", got)
	}
	res := f.search(t, "al_dup")
	if res.TotalCount != 2 || len(res.Messages) != 2 {
		t.Fatalf("search = %+v, want both messages listed", res)
	}
	if res.Messages[0].MessageID != second.MessageID || res.Messages[1].MessageID != first.MessageID {
		t.Errorf("search order = %s, %s; want newest first", res.Messages[0].MessageID, res.Messages[1].MessageID)
	}
}

func TestRequestsRecordEveryHeader(t *testing.T) {
	t.Parallel()
	f := setup(t, postmark.Config{ServerToken: "pm-secret"})
	if _, err := f.do(http.MethodPost, "/email", map[string]string{"X-Postmark-Server-Token": "pm-secret"}, emailBody("jane@example.com", "al_1")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.do(http.MethodGet, "/messages/outbound?count=1&offset=0", nil, ""); err != nil {
		t.Fatal(err)
	}

	reqs := f.pm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("Requests() = %d, want 2", len(reqs))
	}
	want := []struct{ method, path, query, token string }{
		{http.MethodPost, "/email", "", "pm-secret"},
		{http.MethodGet, "/messages/outbound", "count=1&offset=0", ""},
	}
	for i, w := range want {
		r := reqs[i]
		if r.Method != w.method || r.Path != w.path || r.RawQuery != w.query || r.Header.Get("X-Postmark-Server-Token") != w.token {
			t.Errorf("request %d = %s %s?%s token %q, want %s %s?%s %q", i, r.Method, r.Path, r.RawQuery, r.Header.Get("X-Postmark-Server-Token"), w.method, w.path, w.query, w.token)
		}
		if r.Header.Get("Accept") != "application/json" {
			t.Errorf("request %d: Accept %q not recorded", i, r.Header.Get("Accept"))
		}
	}
}

// TestTheRecipesLookupFindsTheMessage sends the lookup of docs/providers/postmark.md as actledger
// renders it: the path with {reference} replaced by the query-escaped external key.
func TestTheRecipesLookupFindsTheMessage(t *testing.T) {
	t.Parallel()
	f := setup(t, postmark.Config{})
	const ref = "al_0b6c9a58-3f43-4c1e-9d1e-2f1f6f0d3a11"
	s := f.send(t, emailBody("jane@example.com", ref))

	path := strings.ReplaceAll("/messages/outbound?count=10&offset=0&metadata_actledger_reference={reference}",
		"{reference}", url.QueryEscape(ref))
	var res searchResult
	r := f.must(t, http.MethodGet, path, "")
	r.Decode(t, &res)
	if r.Status != http.StatusOK || res.TotalCount != 1 || len(res.Messages) != 1 || res.Messages[0].MessageID != s.MessageID {
		t.Errorf("recipe lookup: status %d, %+v; want the one message %s", r.Status, res, s.MessageID)
	}
}

func TestMetadataValuesMayBeNumbers(t *testing.T) {
	t.Parallel()
	f := setup(t, postmark.Config{})
	f.send(t, `{"From":"support@acme.example","To":"jane@example.com","TextBody":"t","Metadata":{"user_id":43,"actledger_reference":"al_n"}}`)
	if got := f.pm.Messages()[0].Metadata["user_id"]; got != "43" {
		t.Errorf("Metadata[user_id] = %q, want \"43\"", got)
	}
	if got := f.pm.Effects("al_n"); got != 1 {
		t.Errorf("Effects = %d, want 1", got)
	}
	r := f.must(t, http.MethodPost, "/email", `{"From":"support@acme.example","To":"jane@example.com","TextBody":"t","Metadata":{"a":{"b":1}}}`)
	if e := r.apiError(t); r.Status != http.StatusUnprocessableEntity || e.ErrorCode != postmark.ErrIncompatibleJSON {
		t.Errorf("nested metadata: status %d, %+v; want 422 with ErrorCode 403", r.Status, e)
	}
}
