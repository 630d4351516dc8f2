package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// stripeReconcile is the reconcile section of the product contract's
// example (Stripe's refund list: https://docs.stripe.com/api/refunds/list,
// created[gte]/created[lt] in unix seconds, has_more and starting_after
// for the next page).
const stripeReconcile = `    reconcile:
      list:
        path: "/v1/refunds?created[gte]={since_unix}&created[lt]={until_unix}&limit=100"
        records: response.data
        next: 'response.has_more ? {"starting_after": response.data[size(response.data) - 1].id} : {}'
        max_pages: 100
        reference: 'has(record.metadata.reference) ? record.metadata.reference : null'
        provider_reference: record.id
        created: record.created
      match: record.amount == params.amount && record.currency == params.currency
      every: 1h
      window: 24h
      lag: 15m
`

// reconcileDoc is a one-provider file with base_url baseURL and the
// reconcile section given (indented four spaces, "reconcile:" included).
func reconcileDoc(baseURL, tenant, section string) string {
	doc := "providers:\n  stripe-refunds:\n    base_url: " + baseURL + "\n    create: {path: /v1/refunds}\n"
	if tenant != "" {
		doc += "    tenant: " + tenant + "\n"
	}
	return doc + section
}

func mustStatement(t *testing.T, baseURL, section string) *HTTP {
	t.Helper()
	reg, err := Parse([]byte(reconcileDoc(baseURL, "acme-corp", section)))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	cfg, _ := reg.Provider("stripe-refunds")
	return NewHTTP(cfg, HTTPOptions{})
}

// listing is a supplier's list endpoint that answers each request with
// the next of its answers and keeps the request URIs.
type listing struct {
	mu   sync.Mutex
	uris []string
}

func (l *listing) serve(t *testing.T, status int, bodies ...string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		n := len(l.uris)
		l.uris = append(l.uris, r.URL.RequestURI())
		l.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(bodies[min(n, len(bodies)-1)]))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (l *listing) requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.uris...)
}

var (
	since = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	until = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
)

func TestContractReconcileExampleLoadsWithItsValues(t *testing.T) {
	t.Parallel()
	p := mustStatement(t, "https://api.stripe.com", stripeReconcile)
	s := p.Config().Reconcile
	if s == nil {
		t.Fatal("Reconcile is nil")
	}
	if s.Every != time.Hour || s.Window != 24*time.Hour || s.Lag != 15*time.Minute || s.Skew != DefaultReconcileSkew || s.MaxPages != 100 {
		t.Errorf("statement = every %s window %s lag %s skew %s max_pages %d", s.Every, s.Window, s.Lag, s.Skew, s.MaxPages)
	}
}

func TestReconcileDefaultsFillWhatIsLeftOut(t *testing.T) {
	t.Parallel()
	section := strings.NewReplacer("        max_pages: 100\n", "", "      every: 1h\n", "", "      window: 24h\n", "", "      lag: 15m\n", "").Replace(stripeReconcile)
	s := mustStatement(t, "https://api.stripe.com", section).Config().Reconcile
	if s.Every != 0 || s.Window != DefaultReconcileWindow || s.Lag != DefaultReconcileLag || s.Skew != DefaultReconcileSkew || s.MaxPages != DefaultReconcileMaxPages {
		t.Errorf("defaults = every %s window %s lag %s skew %s max_pages %d", s.Every, s.Window, s.Lag, s.Skew, s.MaxPages)
	}
}

func TestListPageSubstitutesTheWindowInBothForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, path string
		until      time.Time
		want       string
	}{
		{"unix seconds", "/v1/refunds?created[gte]={since_unix}&created[lt]={until_unix}", until, "/v1/refunds?created[gte]=1796112000&created[lt]=1796198400"},
		{"RFC 3339, query-escaped", "/records?from={since}&to={until}", until, "/records?from=2026-12-01T08%3A00%3A00Z&to=2026-12-02T08%3A00%3A00Z"},
		{"until rounded up to the second", "/records?from={since_unix}&to={until_unix}", until.Add(300 * time.Millisecond), "/records?from=1796112000&to=1796198401"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var l listing
			srv := l.serve(t, 200, `{"data": [], "has_more": false}`)
			section := strings.Replace(stripeReconcile, `"/v1/refunds?created[gte]={since_unix}&created[lt]={until_unix}&limit=100"`, `"`+tt.path+`"`, 1)
			p := mustStatement(t, srv.URL, section)
			page, err := p.ListPage(context.Background(), since, tt.until, nil)
			if err != nil {
				t.Fatalf("ListPage: %v", err)
			}
			if page.Next != nil {
				t.Errorf("Next = %v, want nil on the last page", page.Next)
			}
			if got := l.requests(); len(got) != 1 || got[0] != tt.want {
				t.Errorf("requests = %q, want [%q]", got, tt.want)
			}
		})
	}
}

func TestListPageAppliesTheCursorAndRemovesNulls(t *testing.T) {
	t.Parallel()
	var l listing
	srv := l.serve(t, 200,
		`{"data": [{"id": "re_1", "created": 1764580000, "metadata": {}}], "has_more": true}`,
		`{"data": [], "has_more": false}`)
	section := strings.Replace(stripeReconcile,
		`'response.has_more ? {"starting_after": response.data[size(response.data) - 1].id} : {}'`,
		`'response.has_more ? {"starting_after": response.data[size(response.data) - 1].id, "limit": null, "created[gte]": "1"} : {}'`, 1)
	p := mustStatement(t, srv.URL, section)
	first, err := p.ListPage(context.Background(), since, until, nil)
	if err != nil {
		t.Fatalf("first page: %v", err)
	}
	if first.Next == nil {
		t.Fatal("first page: Next is nil, want a cursor")
	}
	if got, want := first.Next.String(), "created%5Bgte%5D=1&limit&starting_after=re_1"; got != want {
		t.Errorf("cursor = %q, want %q", got, want)
	}
	last, err := p.ListPage(context.Background(), since, until, first.Next)
	if err != nil {
		t.Fatalf("second page: %v", err)
	}
	if last.Next != nil || len(last.Records) != 0 {
		t.Errorf("second page = %+v, want no records and no next", last)
	}
	want := "/v1/refunds?created[lt]=1796198400&created%5Bgte%5D=1&starting_after=re_1"
	if got := l.requests(); len(got) != 2 || got[1] != want {
		t.Errorf("requests = %q, want the second %q", got, want)
	}
}

// list.records and list.next read the window (since, until) and the
// cursor the page was asked with: a list that pages by offset counts on
// from it, and a list that cannot be bounded by the window is filtered
// by it.
func TestListPageReadsTheWindowAndTheCursor(t *testing.T) {
	t.Parallel()
	var l listing
	in := since.Add(time.Hour).Format(time.RFC3339)
	srv := l.serve(t, 200,
		`{"Messages": [{"id": "m_1", "at": "`+in+`"}, {"id": "m_old", "at": "`+since.Add(-time.Second).Format(time.RFC3339)+`"}], "TotalCount": 3}`,
		`{"Messages": [{"id": "m_2", "at": "`+in+`"}], "TotalCount": 3}`)
	section := `    reconcile:
      list:
        path: "/messages/outbound?fromdate={since}&count=2&offset=0"
        records: 'response.Messages.filter(m, timestamp(m.at) >= since && timestamp(m.at) < until)'
        next: >-
          int("offset" in cursor ? cursor.offset : "0") + size(response.Messages) < response.TotalCount
          ? {"offset": string(int("offset" in cursor ? cursor.offset : "0") + size(response.Messages))} : {}
        reference: 'null'
        provider_reference: record.id
        created: record.at
      match: "true"
`
	p := mustStatement(t, srv.URL, section)
	first, err := p.ListPage(context.Background(), since, until, nil)
	if err != nil {
		t.Fatalf("first page: %v", err)
	}
	if len(first.Records) != 1 || first.Records[0].ProviderReference != "m_1" || first.Next.String() != "offset=2" {
		t.Fatalf("first page = %+v next %q, want m_1 alone (m_old is before since) and offset=2", first.Records, first.Next.String())
	}
	last, err := p.ListPage(context.Background(), since, until, first.Next)
	if err != nil {
		t.Fatalf("second page: %v", err)
	}
	if len(last.Records) != 1 || last.Next != nil {
		t.Fatalf("second page = %+v next %v, want m_2 and no next", last.Records, last.Next)
	}
}

// {since_local} and {until_local} are the window's ends in list.zone,
// written without an offset, as a supplier that reads its own local time
// takes them (Postmark's fromdate and todate are Eastern time).
func TestListPageWritesLocalEndsInTheListsZone(t *testing.T) {
	t.Parallel()
	var l listing
	srv := l.serve(t, 200, `{"Messages": []}`)
	section := `    reconcile:
      list:
        path: "/messages/outbound?fromdate={since_local}&todate={until_local}"
        zone: America/New_York
        records: response.Messages
        next: '{}'
        reference: 'null'
        provider_reference: record.id
        created: record.at
      match: "true"
`
	s := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	if _, err := mustStatement(t, srv.URL, section).ListPage(context.Background(), s, s.Add(24*time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	if got, want := l.requests()[0], "/messages/outbound?fromdate=2026-12-01T22%3A00%3A00&todate=2026-12-02T22%3A00%3A00"; got != want {
		t.Fatalf("request %q, want %q", got, want)
	}
	_, err := Parse([]byte(reconcileDoc("https://x.example", "acme-corp", strings.Replace(section, "America/New_York", "Eastern", 1))))
	if err == nil || !strings.Contains(err.Error(), "reconcile.list.zone") {
		t.Fatalf("an unknown zone loads: %v", err)
	}
}

func TestListPageReadsEachRecordOrSaysWhyItCannot(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 10<<10)
	body := `{"has_more": false, "data": [
		{"id": "re_1", "created": 1764580000, "metadata": {"reference": "al_1"}, "amount": 100},
		{"id": "re_2", "created": "2026-12-01T09:00:00.5+01:00", "metadata": {"reference": "al_2"}},
		{"id": "re_3", "created": 1764580000, "metadata": {}},
		{"id": "re_4", "metadata": {"reference": "al_4"}},
		{"id": "re_5", "created": 1764580000, "metadata": {"reference": "al_\u0007bell"}},
		{"id": "re_6", "created": 1764580000, "metadata": {"reference": "` + long + `"}},
		{"id": "re_7", "created": 1764580000},
		{"id": "re_8", "created": "yesterday", "metadata": {}},
		{"id": 9, "created": 1764580000.25, "metadata": {"reference": 12}}
	]}`
	var l listing
	srv := l.serve(t, 200, body)
	page, err := mustStatement(t, srv.URL, stripeReconcile).ListPage(context.Background(), since, until, nil)
	if err != nil {
		t.Fatalf("ListPage: %v", err)
	}
	want := []struct {
		ref, prov string
		created   time.Time
		skip      string // substring; "" when the record can be judged
	}{
		{"al_1", "re_1", time.Unix(1764580000, 0).UTC(), ""},
		{"al_2", "re_2", time.Date(2026, 12, 1, 8, 0, 0, 5e8, time.UTC), ""},
		{"", "re_3", time.Unix(1764580000, 0).UTC(), ""},
		{"", "", time.Time{}, "reconcile.list.created failed on it"},
		{"", "", time.Time{}, "its reference holds control characters"},
		{"", "", time.Time{}, "its reference is longer than 1024 bytes"},
		{"", "", time.Time{}, "reconcile.list.reference failed on it"},
		{"", "", time.Time{}, `its created time "yesterday" is not an RFC 3339 time`},
		{"", "", time.Time{}, "its reference is a number, not a string"},
	}
	if len(page.Records) != len(want) {
		t.Fatalf("got %d records, want %d", len(page.Records), len(want))
	}
	for i, w := range want {
		got := page.Records[i]
		if w.skip != "" {
			if !strings.Contains(got.Skip, w.skip) {
				t.Errorf("record %d: Skip = %q, want it to contain %q", i, got.Skip, w.skip)
			}
			continue
		}
		if got.Skip != "" || got.Reference != w.ref || got.ProviderReference != w.prov || !got.Created.Equal(w.created) {
			t.Errorf("record %d = {%q %q %s skip %q}, want {%q %q %s}", i, got.Reference, got.ProviderReference, got.Created, got.Skip, w.ref, w.prov, w.created)
		}
		if !json.Valid(got.Raw) || !strings.Contains(string(got.Raw), w.prov) {
			t.Errorf("record %d: Raw = %s, want the record as listed", i, got.Raw)
		}
	}
}

func TestListPageCreatedMayBeFractionalUnixSeconds(t *testing.T) {
	t.Parallel()
	var l listing
	srv := l.serve(t, 200, `{"has_more": false, "data": [{"id": "re_1", "created": 1764580000.25, "metadata": {}}]}`)
	page, err := mustStatement(t, srv.URL, stripeReconcile).ListPage(context.Background(), since, until, nil)
	if err != nil {
		t.Fatalf("ListPage: %v", err)
	}
	if got, want := page.Records[0].Created, time.Unix(1764580000, 25e7).UTC(); page.Records[0].Skip != "" || !got.Equal(want) {
		t.Errorf("record = %+v, want created %s", page.Records[0], want)
	}
}

func TestListPageErrorsAreStatementErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		body    string
		section func(string) string
		want    []string
	}{
		{"unauthorized", 401, `{"error": {"message": "Invalid API Key provided"}}`, nil, []string{"HTTP 401", "Invalid API Key provided"}},
		{"rate limited", 429, `{"error": {"message": "Too many requests"}}`, nil, []string{"HTTP 429", "Too many requests"}},
		{"server error, long body cut", 500, strings.Repeat("oops ", 1000), nil, []string{"HTTP 500", "oops oops", "…"}},
		{"not JSON", 200, `<html>maintenance</html>`, nil, []string{"the body is not JSON", "maintenance"}},
		{"records not a list", 200, `{"data": {"id": "re_1"}, "has_more": false}`, nil, []string{"reconcile.list.records: is a map, not a list"}},
		{"next not a map", 200, `{"data": [], "has_more": false}`, func(s string) string {
			return strings.Replace(s, `'response.has_more ? {"starting_after": response.data[size(response.data) - 1].id} : {}'`, `response.has_more`, 1)
		}, []string{"reconcile.list.next: is a bool, not a map"}},
		{"next with a number", 200, `{"data": [], "has_more": false, "page": 2}`, func(s string) string {
			return strings.Replace(s, `'response.has_more ? {"starting_after": response.data[size(response.data) - 1].id} : {}'`, `'{"page": response.page}'`, 1)
		}, []string{`"page" is a number: every value must be a string or null`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var l listing
			srv := l.serve(t, tt.status, tt.body)
			section := stripeReconcile
			if tt.section != nil {
				section = tt.section(section)
			}
			_, err := mustStatement(t, srv.URL, section).ListPage(context.Background(), since, until, nil)
			var se *StatementError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a *StatementError", err)
			}
			if tt.status != 200 && se.Status != tt.status {
				t.Errorf("Status = %d, want %d", se.Status, tt.status)
			}
			if len(se.Reason) > 2*maxExcerpt+100 {
				t.Errorf("Reason is %d bytes, want it bounded", len(se.Reason))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestListPageTransportErrorsAreStatementErrors(t *testing.T) {
	t.Parallel()
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		_, err := mustStatement(t, url, stripeReconcile).ListPage(context.Background(), since, until, nil)
		var se *StatementError
		if !errors.As(err, &se) || se.Status != 0 || se.Err == nil || !strings.Contains(err.Error(), "no answer") {
			t.Errorf("err = %v, want a *StatementError with no status wrapping the transport error", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		doc := strings.Replace(reconcileDoc(srv.URL, "acme-corp", stripeReconcile), "    create:", "    timeout: 50ms\n    create:", 1)
		reg, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		cfg, _ := reg.Provider("stripe-refunds")
		_, err = NewHTTP(cfg, HTTPOptions{}).ListPage(context.Background(), since, until, nil)
		var se *StatementError
		if !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after 50ms") {
			t.Errorf("err = %v, want a *StatementError wrapping the deadline", err)
		}
	})
}

func TestMatchComparesTheRecordWithTheParams(t *testing.T) {
	t.Parallel()
	var l listing
	srv := l.serve(t, 200, `{"has_more": false, "data": [{"id": "re_1", "created": 1764580000, "amount": 1999, "currency": "usd", "metadata": {"reference": "al_1"}}]}`)
	p := mustStatement(t, srv.URL, stripeReconcile)
	page, err := p.ListPage(context.Background(), since, until, nil)
	if err != nil {
		t.Fatalf("ListPage: %v", err)
	}
	rec := page.Records[0]
	s := p.Config().Reconcile
	tests := []struct {
		name    string
		rec     StatementRecord
		params  string
		want    bool
		wantErr string
	}{
		{"same amount and currency", rec, `{"amount": 1999, "currency": "usd"}`, true, ""},
		{"other amount", rec, `{"amount": 2000, "currency": "usd"}`, false, ""},
		{"record given only as Raw", StatementRecord{Raw: rec.Raw}, `{"amount": 1999, "currency": "usd"}`, true, ""},
		{"params lack the field", rec, `{"amount": 1999}`, false, "reconcile.match: no such key: currency"},
		{"params not an object", rec, `[1]`, false, "params must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.Match(tt.rec, json.RawMessage(tt.params))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Match = %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Match = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestReconcileLoadErrorsNameTheField(t *testing.T) {
	t.Parallel()
	swap := func(old, new string) string { return strings.Replace(stripeReconcile, old, new, 1) }
	tests := []struct {
		name, tenant, section string
		want                  string
	}{
		{"no tenant", "", stripeReconcile, `provider "stripe-refunds": tenant: is required for a provider with reconcile`},
		{"no path", "t", swap(`        path: "/v1/refunds?created[gte]={since_unix}&created[lt]={until_unix}&limit=100"`+"\n", ""), `reconcile.list.path: is required with reconcile`},
		{"absolute URL path", "t", swap(`"/v1/refunds?`, `"https://evil.example/v1/refunds?`), `reconcile.list.path: must be a path relative to base_url`},
		{"scheme-relative path", "t", swap(`"/v1/refunds?`, `"//evil.example/v1/refunds?`), `reconcile.list.path: must be a path relative to base_url`},
		{"unknown placeholder", "t", swap(`limit=100`, `limit={reference}`), `reconcile.list.path: may hold only {since}, {until}, {since_unix}, {until_unix}, {since_local} and {until_local}, not {reference}`},
		{"no window start", "t", swap(`created[gte]={since_unix}&`, ``), `reconcile.list.path: must hold {since}, {since_unix} or {since_local}`},
		{"no records", "t", swap("        records: response.data\n", ""), `reconcile.list.records: is required with reconcile`},
		{"records not a list", "t", swap("records: response.data", "records: '1'"), `reconcile.list.records: must be a list, is int`},
		{"bad match", "t", swap("match: record.amount == params.amount", "match: record.amount =="), `provider "stripe-refunds": reconcile.match: `},
		{"match not a bool", "t", swap("match: record.amount == params.amount && record.currency == params.currency", "match: '\"yes\"'"), `reconcile.match: must be a bool, is string`},
		{"unknown variable", "t", swap("provider_reference: record.id", "provider_reference: response.id"), `reconcile.list.provider_reference: `},
		{"no next", "t", swap(`        next: 'response.has_more ? {"starting_after": response.data[size(response.data) - 1].id} : {}'`+"\n", ""), `reconcile.list.next: is required with reconcile`},
		{"no created", "t", swap("        created: record.created\n", ""), `reconcile.list.created: is required with reconcile`},
		{"created a bool", "t", swap("created: record.created", "created: 'true'"), `reconcile.list.created: must be unix seconds or an RFC 3339 string, is bool`},
		{"max_pages zero", "t", swap("max_pages: 100", "max_pages: 0"), `reconcile.list.max_pages: must be at least 1, got 0`},
		{"max_pages too many", "t", swap("max_pages: 100", "max_pages: 10001"), `reconcile.list.max_pages: must be at most 10000, got 10001`},
		{"negative every", "t", swap("every: 1h", "every: -1h"), `reconcile.every: must not be negative`},
		{"zero window", "t", swap("window: 24h", "window: 0s"), `reconcile.window: must be positive`},
		{"negative lag", "t", swap("lag: 15m", "lag: -15m"), `reconcile.lag: must not be negative`},
		{"garbage skew", "t", swap("lag: 15m", "lag: 15m\n      skew: soon"), `reconcile.skew: invalid duration "soon"`},
		{"window within twice the skew", "t", swap("window: 24h", "window: 10m"), `reconcile.window: (10m) must be longer than twice reconcile.skew (5m)`},
		{"every longer than the window", "t", swap("every: 1h", "every: 48h"), `reconcile.every: (48h) must not be longer than reconcile.window (24h)`},
		{"unknown key", "t", swap("      every: 1h\n", "      evry: 1h\n"), `field evry not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(reconcileDoc("https://api.stripe.com", tt.tenant, tt.section)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse error = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func TestReconcileOverPlainHTTPNeedsALoopbackHost(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(reconcileDoc("http://api.example", "t", stripeReconcile)))
	if err == nil || !strings.Contains(err.Error(), "base_url: ") {
		t.Errorf("Parse error = %v, want base_url refused", err)
	}
}

func TestDescribeSaysWhatARunComparesAndHowOften(t *testing.T) {
	t.Parallel()
	s := mustStatement(t, "https://api.stripe.com", stripeReconcile).Config().Reconcile
	want := "every 1h, reads the supplier's records created in the 24h up to 15m ago " +
		"(GET /v1/refunds?created[gte]={since_unix}&created[lt]={until_unix}&limit=100, at most 100 pages) and matches each to an operation by its reference; " +
		"a record whose match (record.amount == params.amount && record.currency == params.currency) is false goes to a person (effect_mismatch), " +
		"two records for one operation too (duplicate_effect), a record naming an open outcome settles it succeeded; " +
		"an operation that succeeded inside the window less 5m at each end and has no record goes to a person (effect_missing)"
	if got := s.Describe(); got != want {
		t.Errorf("Describe =\n%s\nwant\n%s", got, want)
	}
	onDemand := strings.Replace(stripeReconcile, "      every: 1h\n", "", 1)
	if got := mustStatement(t, "https://api.stripe.com", onDemand).Config().Reconcile.Describe(); !strings.HasPrefix(got, "only on demand (actledger reconcile), reads") {
		t.Errorf("Describe without every = %q", got)
	}
}
