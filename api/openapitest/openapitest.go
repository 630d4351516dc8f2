// Package openapitest holds the API to its OpenAPI document in tests:
// Handler wraps the API's handler so that every request a test sends and
// every answer it gets are checked against api/openapi.yaml, and any that
// does not conform fails the test. The API tests and every test that runs
// the pipeline (internal/testpipeline) serve the API through it, so the
// document is checked by everything they do.
//
// What fails a test:
//   - an answer that the document does not describe (status, headers, body);
//   - a request the document refuses that the API accepted (a 2xx or 3xx):
//     either the document is too strict or the API too lax;
//   - a path or method the document does not have, answered other than 404
//     or 405 (what the route table marks undocumented, and the patterns
//     given to Handler, such as the console's pages, pass unchecked).
//
// A request the document refuses and the API refuses too (4xx) is what a
// test of bad input sends on purpose; its answer must still conform.
//
// The checks run once the answer has gone out, so they never slow what a
// test measures; the test waits for them before it ends.
//
// It is for tests only: production code never imports it.
package openapitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/actledger/actledger/api"
)

// maxCheckedBody is the most of a request or answer body that is read for
// a check; a larger body is passed on unchecked.
const maxCheckedBody = 8 << 20

func init() {
	// The review replay streams NDJSON; its schema describes the lines as
	// an array. MCP may answer with a server-sent event stream, checked as
	// text.
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", ndjsonDecoder)
	openapi3filter.RegisterBodyDecoder("text/event-stream", textDecoder)
}

// Document returns the API's OpenAPI document, loaded and validated once.
func Document() (*openapi3.T, error) { return loadDocument() }

var loadDocument = sync.OnceValues(func() (*openapi3.T, error) {
	raw, err := api.OpenAPI()
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("openapitest: load the document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapitest: the document is not valid OpenAPI: %w", err)
	}
	return doc, nil
})

// outsideMux matches the routes the route table marks undocumented and
// the patterns given: traffic the document does not describe.
func outsideMux(outside []string) *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range api.Routes() {
		if rt.Undocumented != "" {
			mux.Handle(rt.Pattern, http.NotFoundHandler())
		}
	}
	for _, pattern := range outside {
		mux.Handle(pattern, http.NotFoundHandler())
	}
	return mux
}

var loadRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := loadDocument()
	if err != nil {
		return nil, err
	}
	return gorillamux.NewRouter(doc)
})

// options are the checks' options: every status must be documented, and
// the request is never changed (no defaults written into it).
func options() *openapi3filter.Options {
	o := &openapi3filter.Options{
		IncludeResponseStatus: true,
		SkipSettingDefaults:   true,
		AuthenticationFunc:    bearerPresent,
	}
	// The reason and the path say what is wrong; the schema and the value
	// (the body is quoted in the failure) would only bury it.
	o.WithCustomSchemaErrorFunc(func(err *openapi3.SchemaError) string {
		return "at /" + strings.Join(err.JSONPointer(), "/") + ": " + err.Reason
	})
	return o
}

// bearerPresent checks the request carries a bearer token, as the
// document's security scheme says; whether the token is good is the API's
// to judge.
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	h := in.RequestValidationInput.Request.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return errors.New("no bearer token")
	}
	return nil
}

// Handler returns next checked against the document: a request or an
// answer that does not conform fails t (see the package comment). outside
// are ServeMux patterns next serves beside the API that the document does
// not describe (the web console's "/console/", which app mounts
// on the API's listener); their traffic passes unchecked.
func Handler(t testing.TB, next http.Handler, outside ...string) http.Handler {
	router, err := loadRouter()
	if err != nil {
		t.Fatal(err)
	}
	undocumented := outsideMux(outside)
	// The checks run after the answer has gone out, so they add nothing to
	// what a test measures (a long poll's wake-up); the test waits for them
	// before it ends.
	var checks sync.WaitGroup
	t.Cleanup(checks.Wait)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, complete, readErr := readBody(r)
		r.Body = replay(body, complete, readErr, r.Body)

		route, pathParams, findErr := router.FindRoute(r)
		if findErr != nil {
			if _, pattern := undocumented.Handler(r); pattern != "" {
				next.ServeHTTP(w, r)
				return
			}
		}
		// A copy for the check, made before the API sees the request.
		checked := checkedRequest(context.Background(), r, body)
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)

		ex := exchange{
			method: r.Method, uri: r.URL.RequestURI(), request: checked, body: body, bodyChecked: complete && readErr == nil,
			status: rec.finalStatus(), header: rec.finalHeader(), answer: rec.body.Bytes(), answerChecked: !rec.truncated,
		}
		checks.Go(func() {
			if findErr != nil {
				if ex.status != http.StatusNotFound && ex.status != http.StatusMethodNotAllowed {
					t.Errorf("openapi: %s %s is not in the document, yet it answered %d (%v)", ex.method, ex.uri, ex.status, findErr)
				}
				return
			}
			ex.check(t, route, pathParams)
		})
	})
}

// exchange is one request and its answer, as the check needs them.
type exchange struct {
	method, uri   string
	request       *http.Request // a copy, with the body
	body          []byte
	bodyChecked   bool // the whole body was read
	status        int
	header        http.Header
	answer        []byte
	answerChecked bool // the whole answer was kept
}

// check reports to t what of the exchange does not conform to route.
func (ex exchange) check(t testing.TB, route *routers.Route, pathParams map[string]string) {
	ctx := context.Background()
	in := &openapi3filter.RequestValidationInput{
		Request: ex.request, PathParams: pathParams, Route: route, Options: options(),
	}
	// A request the API refused is what a test of bad input sends on
	// purpose: only an accepted one must conform, so only it is checked
	// (each check compiles the request's schemas again, the most of
	// these checks' cost under the race detector).
	if ex.bodyChecked && ex.status < 400 {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			t.Errorf("openapi: %s %s: the API answered %d to a request the document refuses: %v\nrequest body: %s",
				ex.method, ex.uri, ex.status, err, clip(ex.body))
		}
	}
	if !ex.answerChecked {
		return
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: ex.status, Header: ex.header, Options: options(),
	}
	out.SetBodyBytes(ex.answer)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		t.Errorf("openapi: %s %s → %d: the answer does not conform to the document: %v\nanswer body: %s",
			ex.method, ex.uri, ex.status, err, clip(ex.answer))
	}
}

// readBody reads r's body for the check, at most maxCheckedBody. complete
// is false when there was more; err is the read's error (a client that
// stopped sending, a read deadline), which the API must see too.
func readBody(r *http.Request) (body []byte, complete bool, err error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true, nil
	}
	body, err = io.ReadAll(io.LimitReader(r.Body, maxCheckedBody+1))
	if len(body) > maxCheckedBody {
		return body, false, err
	}
	return body, true, err
}

// replay gives the API the body as the client sent it: what was read, then
// the rest (or the read's error).
func replay(body []byte, complete bool, err error, rest io.ReadCloser) io.ReadCloser {
	if rest == nil || rest == http.NoBody {
		return rest
	}
	var tail io.Reader = eofReader{}
	switch {
	case err != nil:
		tail = errReader{err}
	case !complete:
		tail = rest
	}
	return readCloser{Reader: io.MultiReader(bytes.NewReader(body), tail), Closer: rest}
}

// checkedRequest is a copy of r for the check, with its body, read as JSON
// whatever its Content-Type says (as the API reads it).
func checkedRequest(ctx context.Context, r *http.Request, body []byte) *http.Request {
	c := r.Clone(ctx)
	c.Body = io.NopCloser(bytes.NewReader(body))
	c.GetBody = nil
	c.ContentLength = int64(len(body))
	if len(body) > 0 {
		c.Header.Set("Content-Type", "application/json")
	}
	return c
}

type readCloser struct {
	io.Reader
	io.Closer
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// recorder passes an answer through and keeps its status, headers and
// (up to maxCheckedBody of) its body. It flushes and unwraps, so streaming
// and deadline-extending routes work through it.
type recorder struct {
	http.ResponseWriter
	status    int
	header    http.Header
	body      bytes.Buffer
	truncated bool
}

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 && code >= 200 {
		rec.status = code
		rec.header = rec.ResponseWriter.Header().Clone()
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK)
	}
	if rec.body.Len()+len(b) > maxCheckedBody {
		rec.truncated = true
	} else {
		rec.body.Write(b)
	}
	return rec.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (rec *recorder) Flush() {
	if f, ok := rec.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

func (rec *recorder) finalStatus() int {
	if rec.status == 0 {
		return http.StatusOK
	}
	return rec.status
}

func (rec *recorder) finalHeader() http.Header {
	if rec.header == nil {
		return rec.ResponseWriter.Header().Clone()
	}
	return rec.header
}

// ndjsonDecoder decodes newline-delimited JSON as the array of its lines.
func ndjsonDecoder(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	lines := []any{}
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), maxCheckedBody)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			return nil, fmt.Errorf("line %d: %w", len(lines)+1, err)
		}
		lines = append(lines, v)
	}
	return lines, sc.Err()
}

// textDecoder decodes a body as one string.
func textDecoder(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	b, err := io.ReadAll(body)
	return string(b), err
}

// clip shortens a body for a failure message.
func clip(b []byte) string {
	const max = 600
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
