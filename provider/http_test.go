package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// arrival is one request as the supplier saw it.
type arrival struct {
	Method, Path string
	Query        map[string][]string
	Header       http.Header
	Body         map[string]any
}

// supplier is an httptest server standing in for a third-party supplier; it records every
// request that reached it.
type supplier struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []arrival
}

func (s *supplier) arrivals() []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]arrival(nil), s.got...)
}

// handlerFunc answers the n-th (1-based) arrival.
type handlerFunc func(w http.ResponseWriter, r *http.Request, n int)

// setup starts a supplier answering with h and returns an HTTP provider configured against it.
// mod adjusts the (valid, acme-like) config before it is validated.
func setup(t *testing.T, h handlerFunc, mod func(*Config)) (*HTTP, *supplier) {
	t.Helper()
	s := &supplier{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		a := arrival{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone()}
		_ = json.Unmarshal(raw, &a.Body)
		s.mu.Lock()
		s.got = append(s.got, a)
		n := len(s.got)
		s.mu.Unlock()
		h(w, r, n)
	}))
	t.Cleanup(s.srv.Close)
	return newProvider(t, s.srv.URL, mod), s
}

func newProvider(t *testing.T, baseURL string, mod func(*Config)) *HTTP {
	t.Helper()
	cfg := Config{
		BaseURL:        baseURL,
		Account:        "acct_123",
		Environment:    "test",
		Timeout:        d(5 * time.Second),
		Create:         Endpoint{Method: "POST", Path: "/v1/orders"},
		ReferenceParam: "client_reference",
		ReferenceField: "id",
		Idempotency:    &Idempotency{Header: "Idempotency-Key", Retention: d(24 * time.Hour)},
		Lookup:         &Lookup{Path: "/v1/orders?client_reference={reference}", VisibilityLag: d(2 * time.Second)},
	}
	if mod != nil {
		mod(&cfg)
	}
	reg, err := NewRegistry(File{Providers: map[string]Config{"acme": cfg}})
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	c, _ := reg.Provider("acme")
	return NewHTTP(c, HTTPOptions{})
}

func respond(status int, body string) handlerFunc {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func noIdempotency(c *Config) { c.Idempotency = nil }

func TestCreateSendsTheExternalKeyInBodyAndIdempotencyHeader(t *testing.T) {
	t.Parallel()
	p, s := setup(t, respond(201, `{"id":"ord_1"}`), nil)

	res := p.Create(t.Context(), CreateRequest{
		ExternalKey: "op_7f3a",
		Params:      json.RawMessage(`{"sku":"A-1","qty":3,"client_reference":"forged-by-model","price":12.50}`),
	})

	if res.Class != ClassSucceeded || res.ProviderReference != "ord_1" {
		t.Fatalf("result = %+v, want succeeded with ord_1", res)
	}
	got := s.arrivals()
	if len(got) != 1 {
		t.Fatalf("supplier saw %d requests, want 1", len(got))
	}
	a := got[0]
	if a.Method != "POST" || a.Path != "/v1/orders" {
		t.Errorf("request = %s %s, want POST /v1/orders", a.Method, a.Path)
	}
	if got, want := a.Header.Get("Idempotency-Key"), "op_7f3a"; got != want {
		t.Errorf("Idempotency-Key = %q, want the external key %q", got, want)
	}
	if got, want := a.Header.Get("Content-Type"), "application/json"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	want := map[string]any{"sku": "A-1", "qty": 3.0, "price": 12.5, "client_reference": "op_7f3a"}
	if fmt.Sprint(a.Body) != fmt.Sprint(want) {
		t.Errorf("body = %v, want %v (reference_param overwritten with the external key)", a.Body, want)
	}
}

func TestCreateWithoutIdempotencyContractSendsNoKeyHeader(t *testing.T) {
	t.Parallel()
	p, s := setup(t, respond(200, `{"id":"ord_1"}`), noIdempotency)
	res := p.Create(t.Context(), CreateRequest{ExternalKey: "op_1"})
	if res.Class != ClassSucceeded {
		t.Fatalf("class = %q, want succeeded: %+v", res.Class, res)
	}
	a := s.arrivals()[0]
	if v := a.Header.Get("Idempotency-Key"); v != "" {
		t.Errorf("Idempotency-Key = %q, want none", v)
	}
	if got := a.Body["client_reference"]; got != "op_1" {
		t.Errorf("body client_reference = %v, want op_1 (empty params become {})", got)
	}
}

func TestCreateUsesTheConfiguredHeaderMethodAndPath(t *testing.T) {
	t.Parallel()
	p, s := setup(t, respond(200, `{"order_id":42}`), func(c *Config) {
		c.Create = Endpoint{Method: "PUT", Path: "/api/orders"}
		c.Idempotency.Header = "X-Request-Token"
		c.ReferenceParam = ""
		c.ReferenceField = "order_id"
	})
	res := p.Create(t.Context(), CreateRequest{ExternalKey: "op_1", Params: json.RawMessage(`{}`)})
	if res.Class != ClassSucceeded || res.ProviderReference != "42" {
		t.Fatalf("result = %+v, want succeeded with numeric reference 42", res)
	}
	a := s.arrivals()[0]
	if a.Method != "PUT" || a.Path != "/api/orders" {
		t.Errorf("request = %s %s, want PUT /api/orders", a.Method, a.Path)
	}
	if got := a.Header.Get("X-Request-Token"); got != "op_1" {
		t.Errorf("X-Request-Token = %q, want op_1", got)
	}
	if got := a.Body[DefaultReferenceParam]; got != "op_1" {
		t.Errorf("body %q = %v, want op_1 (default reference_param)", DefaultReferenceParam, got)
	}
}

func TestCreateClassifiesEachContractRowFromALiveSupplier(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		h       handlerFunc
		mod     func(*Config)
		want    Class
		wantRA  time.Duration
		wantRef string
	}{
		{name: "201 succeeded", h: respond(201, `{"id":"ord_9"}`), want: ClassSucceeded, wantRef: "ord_9"},
		{name: "400 rejected", h: respond(400, `{"error":"bad sku"}`), want: ClassRejected},
		{name: "401 rejected", h: respond(401, ``), want: ClassRejected},
		{name: "403 rejected", h: respond(403, ``), want: ClassRejected},
		{name: "404 rejected", h: respond(404, ``), want: ClassRejected},
		{name: "422 rejected", h: respond(422, `{"error":"qty"}`), want: ClassRejected},
		{name: "409 with idempotency unknown", h: respond(409, `{"error":"in progress"}`), want: ClassUnknown},
		{name: "409 without idempotency unknown", h: respond(409, `{"error":"duplicate client_reference"}`), mod: noIdempotency, want: ClassUnknown},
		{name: "429 not executed", h: func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(429)
		}, want: ClassNotExecuted, wantRA: 2 * time.Second},
		{name: "503 with Retry-After not executed", h: func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
		}, want: ClassNotExecuted, wantRA: time.Second},
		{name: "503 without Retry-After unknown", h: respond(503, ``), want: ClassUnknown},
		{name: "500 unknown", h: respond(500, `oops`), want: ClassUnknown},
		{name: "502 unknown", h: respond(502, ``), want: ClassUnknown},
		{name: "redirect is not followed and unknown", h: func(w http.ResponseWriter, r *http.Request, _ int) {
			if r.URL.Path == "/elsewhere" {
				respond(200, `{"id":"someone_elses"}`)(w, r, 0)
				return
			}
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, want: ClassUnknown},
		{name: "405 unknown", h: respond(405, ``), want: ClassUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, s := setup(t, tt.h, tt.mod)
			res := p.Create(t.Context(), CreateRequest{ExternalKey: "op_1", Params: json.RawMessage(`{"sku":"A"}`)})
			if res.Class != tt.want {
				t.Errorf("class = %q, want %q (result %+v)", res.Class, tt.want, res)
			}
			if res.RetryAfter != tt.wantRA {
				t.Errorf("RetryAfter = %v, want %v", res.RetryAfter, tt.wantRA)
			}
			if res.ProviderReference != tt.wantRef {
				t.Errorf("ProviderReference = %q, want %q", res.ProviderReference, tt.wantRef)
			}
			if !res.Sent || res.HTTPStatus == 0 {
				t.Errorf("Sent = %v, HTTPStatus = %d; want sent with a status", res.Sent, res.HTTPStatus)
			}
			if n := len(s.arrivals()); n != 1 {
				t.Errorf("supplier saw %d requests, want exactly 1", n)
			}
		})
	}
}

func TestCreateRecordsAccountEnvironmentTimesAndEvidence(t *testing.T) {
	t.Parallel()
	p, _ := setup(t, respond(422, `{"error":"qty must be positive","customer":"ann@example.com"}`), func(c *Config) { c.Evidence.Keep = []string{"error"} })
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var tick atomic.Int64
	p.now = func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Second) }

	res := p.Create(t.Context(), CreateRequest{ExternalKey: "op_1"})

	if res.Account != "acct_123" || res.Environment != "test" {
		t.Errorf("account/environment = %q/%q, want acct_123/test", res.Account, res.Environment)
	}
	if !res.StartedAt.Equal(base.Add(time.Second)) || !res.EndedAt.After(res.StartedAt) {
		t.Errorf("StartedAt = %v, EndedAt = %v; want start from the injected clock and end after it", res.StartedAt, res.EndedAt)
	}
	if res.HTTPStatus != 422 || res.Body != `{"error":"qty must be positive"}` {
		t.Errorf("status/body = %d %q", res.HTTPStatus, res.Body)
	}
	if !strings.Contains(res.Error, "422") {
		t.Errorf("Error = %q, want the reason for the class", res.Error)
	}
}

func TestSuccessWithUnreadableReferenceIsAConfirmedEffectForAPerson(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, wantErr string
	}{
		{"garbage body", `<html>created</html>`, "not a JSON object"},
		{"empty body", ``, "body is empty"},
		{"truncated JSON", `{"id":"ord_`, "not valid JSON"},
		{"missing reference field", `{"order":"ord_1"}`, `no "id" field`},
		{"empty reference", `{"id":""}`, `"id" is empty`},
		{"reference is an object", `{"id":{"v":1}}`, "neither a string nor a number"},
		{"reference holds U+0000", `{"id":"ord_\u0000"}`, "U+0000"},
		{"array body", `[{"id":"ord_1"}]`, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, _ := setup(t, respond(201, tt.body), nil)
			res := p.Create(t.Context(), CreateRequest{ExternalKey: "op_1"})
			if res.Class != ClassSucceeded || res.Review != ReviewReferenceMissing {
				t.Errorf("class, review = %q, %q; want succeeded, reference_missing: a 2xx confirms the effect whatever the body", res.Class, res.Review)
			}
			if res.ProviderReference != "" {
				t.Errorf("ProviderReference = %q, want empty", res.ProviderReference)
			}
			if !strings.Contains(res.Error, "reference is unknown") || !strings.Contains(res.Error, tt.wantErr) {
				t.Errorf("Error = %q, want it to explain (%q)", res.Error, tt.wantErr)
			}
		})
	}
}

func TestHugeBodyIsReadOnlyUpToTheCapAndKeptAt2KiB(t *testing.T) {
	t.Parallel()
	const size = 5 << 20
	var written atomic.Int64
	p, _ := setup(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(201)
		chunk := []byte(`{"id":"ord_1","pad":"` + strings.Repeat("é", 1000))
		for written.Load() < size {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
			chunk = bytes.Repeat([]byte("x"), 64<<10)
		}
	}, func(c *Config) { c.Evidence.Keep = []string{KeepAll} })

	res := p.Create(t.Context(), CreateRequest{ExternalKey: "op_1"})

	if res.Class != ClassSucceeded {
		t.Errorf("class = %q, want succeeded", res.Class)
	}
	if !strings.Contains(res.Error, "larger than") {
		t.Errorf("Error = %q, want it to say the body was too large to parse", res.Error)
	}
	if len(res.Body) > maxBodyKept {
		t.Errorf("kept %d body bytes, want at most %d", len(res.Body), maxBodyKept)
	}
	if !strings.HasPrefix(res.Body, `{"id":"ord_1"`) || strings.Contains(res.Body, "\uFFFD") {
		t.Errorf("kept body does not start the real body cleanly (cut on a rune boundary): %.60q…", res.Body)
	}
}

func TestEvidenceKeepsOnlyTheFieldsRecoveryNeeds(t *testing.T) {
	t.Parallel()
	const answer = `{"id":"ord_1","status":"created","client_reference":"op_1","customer":{"email":"ann@example.com"},"card_last4":"4242"}`
	tests := []struct {
		name string
		keep []string
		body string
		want string
	}{
		{"default: id, status, reference field and param", nil, answer, `{"client_reference":"op_1","id":"ord_1","status":"created"}`},
		{"named fields", []string{"id", "card_last4"}, answer, `{"card_last4":"4242","id":"ord_1"}`},
		{"all", []string{KeepAll}, answer, answer},
		{"an answer that is not an object keeps nothing", nil, `<html>Internal Server Error</html>`, ``},
		{"no named field present keeps nothing", []string{"order"}, answer, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, _ := setup(t, respond(201, tt.body), func(c *Config) { c.Evidence.Keep = tt.keep })
			if res := p.Create(t.Context(), CreateRequest{ExternalKey: "op_1"}); res.Body != tt.want {
				t.Errorf("create evidence = %q, want %q", res.Body, tt.want)
			}
			if res := p.Lookup(t.Context(), LookupRequest{ExternalKey: "op_1"}); res.Body != tt.want {
				t.Errorf("lookup evidence = %q, want %q", res.Body, tt.want)
			}
		})
	}
}

func TestEvidenceIsValidUTF8WithoutNULs(t *testing.T) {
	t.Parallel()
	got := evidence([]byte("ok\x00\xff\xfe" + strings.Repeat("é", 3000)))
	if !strings.HasPrefix(got, "ok\uFFFD\uFFFD") || strings.ContainsRune(got, 0) || len(got) > maxBodyKept+6 {
		t.Errorf("evidence = %.40q… (len %d)", got, len(got))
	}
}

func TestHangingProviderIsCutByTimeoutAndClassifiedUnknown(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	p, s := setup(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}, func(c *Config) { c.Timeout = d(150 * time.Millisecond) })
	t.Cleanup(func() { close(release) }) // runs before the server's Close

	start := time.Now()
	res := p.Create(t.Context(), CreateRequest{ExternalKey: "op_1"})
	elapsed := time.Since(start)

	if res.Class != ClassUnknown || !res.Sent || res.HTTPStatus != 0 {
		t.Errorf("result = %+v, want unknown, sent, no status", res)
	}
	if !strings.Contains(res.Error, "timed out after 150ms") {
		t.Errorf("Error = %q, want it to name the timeout", res.Error)
	}
	if elapsed > 3*time.Second {
		t.Errorf("Create took %v, want it cut near the 150ms timeout", elapsed)
	}
	if n := len(s.arrivals()); n != 1 {
		t.Errorf("supplier saw %d requests, want 1", n)
	}
}

func TestConnectionRefusedIsNotExecutedAndNothingSent(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there any more: the dial is refused
	p := newProvider(t, "http://"+addr, nil)

	res := p.Create(t.Context(), CreateRequest{ExternalKey: "op_1"})

	if res.Class != ClassNotExecuted || res.Sent || res.HTTPStatus != 0 {
		t.Errorf("result = %+v, want not_executed, not sent", res)
	}
	if !strings.Contains(res.Error, "refused") {
		t.Errorf("Error = %q, want it to say the connection was refused", res.Error)
	}
	if strings.Contains(res.Error, addr) && strings.Contains(res.Error, "/v1/orders") {
		t.Errorf("Error = %q carries the request URL", res.Error)
	}
}

func TestCreateRefusesToSendWithoutKeyOrWithNonObjectParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  CreateRequest
	}{
		{"empty external key", CreateRequest{Params: json.RawMessage(`{}`)}},
		{"array params", CreateRequest{ExternalKey: "op_1", Params: json.RawMessage(`[1,2]`)}},
		{"string params", CreateRequest{ExternalKey: "op_1", Params: json.RawMessage(`"x"`)}},
		{"broken params", CreateRequest{ExternalKey: "op_1", Params: json.RawMessage(`{"a":`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, s := setup(t, respond(201, `{"id":"x"}`), nil)
			res := p.Create(t.Context(), tt.req)
			if res.Class != ClassNotExecuted || res.Sent || res.Error == "" {
				t.Errorf("result = %+v, want not_executed, not sent, with a reason", res)
			}
			if n := len(s.arrivals()); n != 0 {
				t.Errorf("supplier saw %d requests, want 0", n)
			}
		})
	}
}

// lostSecondResponse answers the first request normally (keeping the connection alive) and
// drops the connection after reading the second, without a response byte: the classic lost
// response on a reused keep-alive connection. Later arrivals are answered normally.
func lostSecondResponse(w http.ResponseWriter, _ *http.Request, n int) {
	if n == 2 {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(201)
	fmt.Fprintf(w, `{"id":"ord_%d"}`, n)
}

// reuseTrace reports, through the caller's context, whether a reused connection was used.
func reuseTrace(ctx context.Context, reused *atomic.Bool) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if info.Reused {
				reused.Store(true)
			}
		},
	})
}

func TestLostResponseOnReusedConnectionIsNotSilentlyResent(t *testing.T) {
	t.Parallel()
	p, s := setup(t, lostSecondResponse, nil)

	first := p.Create(t.Context(), CreateRequest{ExternalKey: "op_first"})
	if first.Class != ClassSucceeded {
		t.Fatalf("first create = %+v, want succeeded", first)
	}
	var reused atomic.Bool
	second := p.Create(reuseTrace(t.Context(), &reused), CreateRequest{ExternalKey: "op_second"})

	if !reused.Load() {
		t.Fatal("second request did not reuse the keep-alive connection; the test proves nothing")
	}
	var keys []string
	for _, a := range s.arrivals() {
		keys = append(keys, a.Header.Get("Idempotency-Key"))
	}
	if got, want := strings.Join(keys, ","), "op_first,op_second"; got != want {
		t.Errorf("supplier saw keys %s, want %s: the second request must arrive exactly once", got, want)
	}
	if second.Class != ClassUnknown || !second.Sent {
		t.Errorf("second create = %+v, want unknown and sent (it reached the supplier)", second)
	}
}

// TestStdlibTransportSilentlyResendsIdempotencyKeyedPost documents the hazard the previous test
// guards against, with the same supplier: a plain net/http POST with an Idempotency-Key header
// arrives twice and the caller sees one clean success. If this ever fails, Go changed its replay
// rule; the guard in HTTP.Create stays harmless, but revisit the comment there.
func TestStdlibTransportSilentlyResendsIdempotencyKeyedPost(t *testing.T) {
	t.Parallel()
	_, s := setup(t, lostSecondResponse, nil)
	client := &http.Client{Transport: newTransport()}
	t.Cleanup(client.CloseIdleConnections)
	post := func(key string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(t.Context(), "POST", s.srv.URL+"/v1/orders", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Idempotency-Key", key)
		return client.Do(req)
	}
	for _, key := range []string{"op_first", "op_second"} {
		resp, err := post(key)
		if err != nil {
			t.Fatalf("POST %s: %v", key, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got, want := len(s.arrivals()), 3; got != want {
		t.Errorf("supplier saw %d arrivals for 2 calls, want %d (the silent resend)", got, want)
	}
}

func TestLookupReportsFoundAbsentOrError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		h        handlerFunc
		mod      func(*Config)
		want     LookupStatus
		wantRef  string
		wantRefs []string
		wantErr  string
	}{
		{name: "object found", h: respond(200, `{"id":"ord_1","client_reference":"op 1/a"}`), want: LookupFound, wantRef: "ord_1"},
		{name: "array of one found", h: respond(200, `[{"id":"ord_1"}]`), want: LookupFound, wantRef: "ord_1"},
		{name: "array of two duplicate", h: respond(200, `[{"id":"ord_1"},{"id":"ord_2"}]`), want: LookupDuplicate, wantRefs: []string{"ord_1", "ord_2"}},
		{name: "numeric reference found", h: respond(200, `{"id":1234}`), want: LookupFound, wantRef: "1234"},
		{name: "404 absent", h: respond(404, `{"error":"not found"}`), want: LookupAbsent},
		{name: "empty array absent", h: respond(200, ` [ ] `), want: LookupAbsent},
		{name: "500 error", h: respond(500, ``), want: LookupError, wantErr: "HTTP 500"},
		{name: "503 error", h: respond(503, ``), want: LookupError, wantErr: "HTTP 503"},
		{name: "garbage error", h: respond(200, `<html>`), want: LookupError, wantErr: "not valid JSON"},
		{name: "object without reference field error", h: respond(200, `{"orders":[]}`), want: LookupError, wantErr: `no "id" field`},
		{name: "array of non-objects error", h: respond(200, `["ord_1"]`), want: LookupError, wantErr: "record 0: is not a JSON object"},
		{name: "someone else's order error", h: respond(200, `[{"id":"ord_9","client_reference":"op_other"}]`), want: LookupError, wantErr: "not the looked-up key"},
		{name: "redirect error", h: func(w http.ResponseWriter, r *http.Request, _ int) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, want: LookupError, wantErr: "HTTP 302"},
		{name: "no lookup configured error", h: respond(200, `{"id":"x"}`), mod: func(c *Config) { c.Lookup = nil }, want: LookupError, wantErr: "no lookup configured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, s := setup(t, tt.h, tt.mod)
			res := p.Lookup(t.Context(), LookupRequest{ExternalKey: "op 1/a"})
			if res.Status != tt.want || res.ProviderReference != tt.wantRef || !slices.Equal(res.References, tt.wantRefs) {
				t.Errorf("lookup = %+v, want %s %q %q", res, tt.want, tt.wantRef, tt.wantRefs)
			}
			if !strings.Contains(res.Error, tt.wantErr) {
				t.Errorf("Error = %q, want it to contain %q", res.Error, tt.wantErr)
			}
			if res.At.IsZero() || res.Account != "acct_123" || res.Environment != "test" {
				t.Errorf("At/Account/Environment not recorded: %+v", res)
			}
			if tt.mod != nil {
				return
			}
			a := s.arrivals()[0]
			if a.Method != "GET" || a.Path != "/v1/orders" {
				t.Errorf("lookup request = %s %s, want GET /v1/orders", a.Method, a.Path)
			}
			if got := a.Query["client_reference"]; len(got) != 1 || got[0] != "op 1/a" {
				t.Errorf("client_reference query = %q, want the escaped key round-tripping to %q", got, "op 1/a")
			}
		})
	}
}

func TestLookupPathPlaceholderIsEscapedForItsPosition(t *testing.T) {
	t.Parallel()
	params := map[string]any{"repo": "acme/site docs", "n": 7.0}
	tests := []struct{ path, key, want string }{
		{"/v1/orders?client_reference={reference}", "a b&c", "/v1/orders?client_reference=a+b%26c"},
		{"/v1/orders/{reference}", "a b/c", "/v1/orders/a%20b%2Fc"},
		{"/v1/{reference}/x?ref={reference}", "k?1", "/v1/k%3F1/x?ref=k%3F1"},
		{"/repos/{params.repo}/issues?q={reference}+repo:{params.repo}&n={params.n}", "k 1", "/repos/acme%2Fsite%20docs/issues?q=k+1+repo:acme%2Fsite+docs&n=7"},
	}
	for _, tt := range tests {
		if got, err := expandPath(tt.path, tt.key, params); err != nil || got != tt.want {
			t.Errorf("expandPath(%q, %q) = %q, %v, want %q", tt.path, tt.key, got, err, tt.want)
		}
	}
}

func TestLookupOfHangingProviderIsAnErrorAfterTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	p, _ := setup(t, func(_ http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}, func(c *Config) { c.Timeout = d(100 * time.Millisecond) })
	t.Cleanup(func() { close(release) })

	res := p.Lookup(t.Context(), LookupRequest{ExternalKey: "op_1"})
	if res.Status != LookupError || !strings.Contains(res.Error, "timed out") {
		t.Errorf("lookup = %+v, want error mentioning the timeout", res)
	}
}
