package openapitest_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/actledger/actledger/api/openapitest"
)

// recordingTB is a testing.TB that keeps what the checks report instead
// of failing the test running them; finish runs its cleanups (which wait
// for the checks) at once.
type recordingTB struct {
	testing.TB
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (r *recordingTB) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// finish runs the cleanups, newest first, and returns what was reported.
func (r *recordingTB) finish() []string {
	r.mu.Lock()
	cleanups := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	return r.reported()
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) reported() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...)
}

// operationJSON is an operation view as the document describes it.
const operationJSON = `{"id":"01a22bf9-440b-7b7a-9f74-60aded2e0c9c","tenant":"acme","action":"supplier.create_order",` +
	`"key":"po-37","client_key":null,"status":"queued","params":{"sku":"A-1"},"params_fingerprint":"jcs-sha256:` + hex64 + `",` +
	`"approval_id":"01a22bf9-4407-733d-a95c-23d3151c21cf","approved_by":"approver:ann","external_key":"al_1","provider":"acme",` +
	`"provider_reference":null,"attempts":0,"created_at":"2026-11-30T10:21:25.89977Z",` +
	`"updated_at":"2026-11-30T10:21:25.89977Z","summary":"Queued.","trace_id":null}`

const hex64 = "d578aa73d9d422719dc45e0cb967d5497d0c89cacb669745baf63974716a8226"

// answer is a handler that answers status with body as JSON, and the
// headers an operation's answers carry.
func answer(status int, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", `"1"`)
		w.Header().Set("Location", "/v1/operations/01a22bf9-440b-7b7a-9f74-60aded2e0c9c")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	})
}

// exchange sends one request through the checked handler and returns what
// the checks reported.
func exchange(t *testing.T, h http.Handler, method, path, token, body string) []string {
	t.Helper()
	rec := &recordingTB{TB: t}
	srv := httptest.NewServer(openapitest.Handler(rec, h))
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	srv.Close()
	return rec.finish()
}

func TestCheckedHandlerReportsWhatTheDocumentDoesNotAllow(t *testing.T) {
	t.Parallel()
	const id = "/v1/operations/01a22bf9-440b-7b7a-9f74-60aded2e0c9c"
	good := `{"action":"supplier.create_order","key":"po-37","params":{"sku":"A-1"},"approval_id":"01a22bf9-4407-733d-a95c-23d3151c21cf"}`
	tests := []struct {
		name                string
		handler             http.Handler
		method, path, token string
		body                string
		want                string // in the report; "" for none
	}{
		{"conforming exchange", answer(201, operationJSON), "POST", "/v1/operations", "tok", good, ""},
		{"refused bad request", answer(400, `{"error":{"code":"unknown_field","message":"x: unknown field"}}`),
			"POST", "/v1/operations", "tok", `{"x":1}`, ""},
		{"accepted bad request", answer(201, operationJSON), "POST", "/v1/operations", "tok", `{"x":1}`,
			"answered 201 to a request the document refuses"},
		{"accepted request without a token", answer(200, operationJSON), "GET", id, "", "",
			"answered 200 to a request the document refuses"},
		{"answer missing a field", answer(200, `{"id":"01a22bf9-440b-7b7a-9f74-60aded2e0c9c"}`), "GET", id, "tok", "",
			"does not conform"},
		{"answer with an undocumented field", answer(200, strings.Replace(operationJSON, `{"id"`, `{"extra":1,"id"`, 1)),
			"GET", id, "tok", "", "does not conform"},
		{"operation answer without its ETag", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, operationJSON)
		}), "GET", id, "tok", "", `response header "ETag" missing`},
		{"undocumented status", answer(418, `{"error":{"code":"teapot","message":"x"}}`), "GET", id, "tok", "",
			"status is not supported"},
		{"error code of another status", answer(404, `{"error":{"code":"forbidden","message":"x"}}`), "GET", id, "tok", "",
			"does not conform"},
		{"undocumented path answered 404", answer(404, `{"error":{"code":"not_found","message":"x"}}`), "GET", "/v1/nope", "tok", "", ""},
		{"undocumented path answered 200", answer(200, `{}`), "GET", "/v1/nope", "tok", "", "is not in the document"},
		{"undocumented method answered 200", answer(200, `{}`), "DELETE", id, "tok", "", "is not in the document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := exchange(t, tt.handler, tt.method, tt.path, tt.token, tt.body)
			switch {
			case tt.want == "" && len(got) > 0:
				t.Errorf("reported %q, want nothing", got)
			case tt.want != "" && (len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), tt.want)):
				t.Errorf("reported %q, want %q", got, tt.want)
			}
		})
	}
}

// A streamed answer reaches the client line by line through the check,
// and is checked whole when it ends.
func TestCheckedHandlerPassesStreamsThroughAndChecksThem(t *testing.T) {
	t.Parallel()
	next := make(chan struct{})
	stream := func(last string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(200)
			_, _ = io.WriteString(w, `{"item":{"reason":"outcome_unknown","result":"no_lookup","changed":false}}`+"\n")
			w.(http.Flusher).Flush()
			<-next // the client has read the first line
			_, _ = io.WriteString(w, last+"\n")
		})
	}
	for _, tt := range []struct {
		name, last, want string
	}{
		{"conforming", `{"summary":{"read":1,"items":1,"open":1,"changed":0,"unchanged":1,"dry_run":false}}`, ""},
		{"a line the document does not allow", `{"summary":{"read":1}}`, "does not conform"},
	} {
		rec := &recordingTB{TB: t}
		srv := httptest.NewServer(openapitest.Handler(rec, stream(tt.last)))
		req, _ := http.NewRequest("POST", srv.URL+"/v1/review/replay", nil)
		req.Header.Set("Authorization", "Bearer tok")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(res.Body)
		if !sc.Scan() {
			t.Fatalf("%s: no first line", tt.name)
		}
		next <- struct{}{}
		for sc.Scan() {
		}
		res.Body.Close()
		srv.Close()
		got := strings.Join(rec.finish(), "\n")
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: reported %q, want %q", tt.name, got, tt.want)
		}
	}
}

// Patterns served beside the API (the console) pass unchecked; the rest of
// the listener is still checked.
func TestCheckedHandlerPassesWhatIsOutsideTheAPI(t *testing.T) {
	t.Parallel()
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html></html>")
	})
	for _, tt := range []struct {
		path, want string
	}{
		{"/console/review", ""},
		{"/elsewhere", "is not in the document"},
	} {
		rec := &recordingTB{TB: t}
		srv := httptest.NewServer(openapitest.Handler(rec, page, "/console/"))
		res, err := http.Get(srv.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		srv.Close()
		got := strings.Join(rec.finish(), "\n")
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: reported %q, want %q", tt.path, got, tt.want)
		}
	}
}

// The document's /metrics answer is what the Prometheus handler writes.
func TestPrometheusMetricsConformToTheDocument(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "actledger_test_total", Help: "A test counter."}))
	if got := exchange(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), "GET", "/metrics", "alt_a-metrics-token", ""); len(got) > 0 {
		t.Errorf("reported %q, want nothing", got)
	}
}
