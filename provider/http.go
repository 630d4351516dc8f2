package provider

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/actledger/actledger/internal/celexpr"
	"github.com/actledger/actledger/tracing"
)

const (
	// maxBodyRead caps how much of a response body is read, so that a huge or endless body can
	// neither exhaust memory nor hold a worker.
	maxBodyRead = 1 << 20
	// maxBodyKept caps the body kept as evidence in Result.Body and LookupResult.Body.
	maxBodyKept = 2 << 10
)

// HTTPOptions are the optional dependencies of an HTTP provider.
type HTTPOptions struct {
	// Client makes the calls. nil means a client of this package's own with pooled keep-alive
	// connections (MaxIdleConnsPerHost 64). A given client is copied, never modified; redirects
	// are never followed whatever its CheckRedirect says. Its Timeout, if set, applies on top of
	// the provider's timeout.
	Client *http.Client
	// Wrap, when set, is put between the client and its transport: it gets every request the
	// provider sends (create, lookup, statement page) and must pass it on to the transport it is
	// given, which sends it to the supplier. `actledger drill` injects its faults there (an
	// answer lost, replaced or held after the supplier answered), so the code under test is the
	// code that runs in production. The transport underneath is the one it would be without
	// Wrap, so whether a request may have been sent is known as precisely.
	Wrap func(http.RoundTripper) http.RoundTripper
	// Now is the clock for Result timestamps and Retry-After dates; nil means time.Now.
	Now func() time.Time
	// TracerProvider makes the client span of each call made in a trace, whose context the
	// request carries to the supplier as its traceparent header. Default: otel's global
	// provider. The span names the provider, the method, the supplier's host and the outcome;
	// never the URL (a path may hold params), a header or a body.
	TracerProvider trace.TracerProvider
}

// HTTP is the Provider for a supplier with a JSON-over-HTTP API described by a Config.
type HTTP struct {
	cfg    *Config
	client *http.Client
	now    func() time.Time
	tracer trace.Tracer
	// gotConnTraced is true when the transport is net/http's own, which reports every
	// connection it hands to a request through httptrace.GotConn before writing a byte.
	gotConnTraced bool
}

var _ Provider = (*HTTP)(nil)

// NewHTTP returns the HTTP provider for cfg. cfg must not be nil and should come from a Registry
// (validated, defaults filled); it is used as is, not copied.
func NewHTTP(cfg *Config, opts HTTPOptions) *HTTP {
	var client http.Client
	if opts.Client != nil {
		client = *opts.Client
	} else {
		client.Transport = newTransport()
	}
	// A redirect answered to a create would turn a POST into a GET (301/302/303) of some other
	// resource whose 2xx would read as "succeeded". Report the redirect itself instead.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	_, stdTransport := client.Transport.(*http.Transport)
	traced := client.Transport == nil || stdTransport
	if opts.Wrap != nil {
		inner := client.Transport
		if inner == nil {
			inner = http.DefaultTransport
		}
		client.Transport = opts.Wrap(inner)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &HTTP{
		cfg:           cfg,
		client:        &client,
		now:           now,
		tracer:        tracing.Tracer(opts.TracerProvider),
		gotConnTraced: traced,
	}
}

func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Dispatcher workers call the same few suppliers concurrently; the default of 2 idle
	// connections per host would make most calls dial afresh.
	t.MaxIdleConnsPerHost = 64
	return t
}

// Config returns the provider's configuration.
func (p *HTTP) Config() *Config { return p.cfg }

// Create sends the create request once and classifies the answer.
//
// The body is req.Params with reference_param set to the external key (replacing any field of
// that name); with an idempotency contract, the idempotency header carries the external key too.
// The call is bounded by the provider's timeout.
//
// One call of Create is at most one arrival at the supplier. net/http would otherwise resend,
// on a fresh connection and without telling anyone, a request that carries an Idempotency-Key
// (or X-Idempotency-Key) header when a reused keep-alive connection fails before the first
// response byte (Request.isReplayable; the request may well have been received and executed).
// That second arrival would be missing from the attempt log, and with a header name other than
// those two the behaviour would silently differ between providers. Create therefore clears
// Request.GetBody: a request whose body cannot be rewound is never replayed. A connection that
// fails this way yields ClassUnknown, and the dispatcher decides about any resend, in the open.
func (p *HTTP) Create(ctx context.Context, req CreateRequest) Result {
	ctx, span := p.startCall(ctx, "provider create", p.cfg.Create.Method)
	res := p.create(ctx, req)
	if span.IsRecording() {
		span.SetAttributes(tracing.Outcome.String(string(res.Class)))
		endCall(span, res.HTTPStatus, res.Error)
	}
	span.End()
	return res
}

// startCall starts the client span of a call to the supplier when ctx is in a trace
// (tracing.Start).
func (p *HTTP) startCall(ctx context.Context, name, method string) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return tracing.Start(ctx, p.tracer, name)
	}
	attrs := []attribute.KeyValue{tracing.Provider.String(p.cfg.Name), attribute.String("http.request.method", cmp.Or(method, DefaultMethod))}
	if u, err := url.Parse(p.cfg.BaseURL); err == nil {
		attrs = append(attrs, attribute.String("server.address", u.Hostname()))
	}
	return tracing.Start(ctx, p.tracer, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endCall gives a recording call span the supplier's HTTP status, and an error status when
// there was no answer or the answer was an error (4xx, 5xx).
func endCall(span trace.Span, status int, errText string) {
	if status > 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	if status == 0 || status >= 400 {
		span.SetStatus(codes.Error, errText)
	}
}

// create is Create's call, in the span Create started.
func (p *HTTP) create(ctx context.Context, req CreateRequest) Result {
	cfg := p.cfg
	res := Result{StartedAt: p.now(), Account: cfg.Account, Environment: cfg.Environment}
	done := func() Result {
		res.EndedAt = p.now()
		return res
	}
	notSent := func(format string, args ...any) Result {
		res.Class, res.Error = ClassNotExecuted, fmt.Sprintf(format, args...)
		return done()
	}
	if req.ExternalKey == "" {
		return notSent("not sent: empty external key (the supplier could not deduplicate)")
	}
	built, err := cfg.createRequest(ctx, req)
	if err != nil {
		// The request cannot be built for these params: it never will be,
		// so no retry; a person fixes the file or the operation.
		res.Review = ReviewProviderConfigError
		return notSent("not sent: %v", err)
	}

	ctx, cancel := context.WithTimeout(ctx, timeoutOf(cfg))
	defer cancel()
	trace := &callTrace{}
	ctx = httptrace.WithClientTrace(ctx, trace.clientTrace())
	hreq, err := http.NewRequestWithContext(ctx, built.Method, built.URL, bytes.NewReader(built.Body))
	if err != nil {
		res.Review = ReviewProviderConfigError
		return notSent("not sent: build request: %v", unwrapURLError(err))
	}
	// No silent resend (see the doc comment): without GetBody the transport cannot rewind the
	// body, so Request.isReplayable is false and a failed reused connection is reported to us
	// instead of being retried behind our back. ContentLength stays set.
	hreq.GetBody = nil
	hreq.Header = built.Header
	// The supplier joins the operation's trace; nothing without one.
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(hreq.Header))

	resp, err := p.client.Do(hreq)
	if err != nil {
		res.Sent = p.mayHaveSent(trace, err)
		if res.Sent {
			res.Class = ClassUnknown
			res.Error = fmt.Sprintf("no answer, may have executed (%s): %s", trace.progress(), describeError(ctx, err, timeoutOf(cfg)))
		} else {
			res.Class = ClassNotExecuted
			res.Error = fmt.Sprintf("not sent: %s", describeError(ctx, err, timeoutOf(cfg)))
		}
		return done()
	}
	defer resp.Body.Close()
	res.Sent = true
	res.HTTPStatus = resp.StatusCode
	raw, readErr := readBody(resp.Body)
	res.Body = cfg.evidenceOf(raw)
	// The answer is parsed for the expressions only: a v1 provider's
	// classification reads the status alone.
	var response any
	if readErr == nil && (len(cfg.compiled.outcomes) > 0 || cfg.compiled.reference != nil) {
		response, _ = celexpr.ParseJSON(raw)
	}
	res.Class, res.RetryAfter, res.Error, res.Review, res.Reason = cfg.classify(ctx, resp.StatusCode, resp.Header, response, p.now())
	if res.Class == ClassSucceeded {
		ref, err := cfg.createReference(ctx, resp, raw, readErr, response)
		if err != nil {
			// The status confirmed the effect; only its name is missing. Never resent (a
			// second effect is worse than a missing name): a person matches it.
			res.Error = fmt.Sprintf("HTTP %d confirmed the effect but the provider reference is unknown: %v", resp.StatusCode, err)
			res.Review = ReviewReferenceMissing
		}
		res.ProviderReference = ref
	}
	return done()
}

// createReference reads the supplier's reference of a 2xx create answer:
// create.reference, or v1's reference_field.
func (c *Config) createReference(ctx context.Context, resp *http.Response, raw []byte, readErr error, response any) (string, error) {
	if readErr != nil {
		return "", readErr
	}
	if p := c.compiled.reference; p != nil {
		ref, err := p.evalID(ctx, map[string]any{"response": response, "status": int64(resp.StatusCode), "headers": headerValues(resp.Header)})
		if err != nil {
			return "", fmt.Errorf("create.reference: %w", err)
		}
		return ref, nil
	}
	return referenceFrom(raw, nil, c.ReferenceField)
}

// Lookup asks the supplier whether an effect tagged with externalKey exists: GET base_url +
// lookup path with {reference} replaced by the escaped key, with the provider's headers and
// credential. A 404 is absent. A 200 answer holds the supplier's records for the key:
// lookup.matches of it, or by v1's rule the object itself or the elements of an array. No
// record is absent, one is found (its reference read by lookup.reference, or reference_field),
// two or more are a duplicate effect, never "found". Anything else is an error. By v1's rule a
// record that carries reference_param naming a different key makes the lookup an error: a
// supplier that ignored the filter must not make someone else's effect count as ours. A 200
// answer for which lookup.complete is false is inconclusive, whatever records it holds: an
// incomplete answer proves no absence, and may hide a second effect.
func (p *HTTP) Lookup(ctx context.Context, req LookupRequest) LookupResult {
	ctx, span := p.startCall(ctx, "provider lookup", http.MethodGet)
	res := p.lookup(ctx, req)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("actledger.lookup", string(res.Status)))
		endCall(span, res.HTTPStatus, res.Error)
	}
	span.End()
	return res
}

// lookup is Lookup's call, in the span Lookup started.
func (p *HTTP) lookup(ctx context.Context, req LookupRequest) LookupResult {
	externalKey := req.ExternalKey
	cfg := p.cfg
	res := LookupResult{Account: cfg.Account, Environment: cfg.Environment}
	fail := func(format string, args ...any) LookupResult {
		res.Status, res.Error, res.At = LookupError, fmt.Sprintf(format, args...), p.now()
		return res
	}
	if cfg.Lookup == nil {
		return fail("provider %q has no lookup configured", cfg.Name)
	}
	if externalKey == "" {
		return fail("empty external key")
	}
	params, err := paramsObject(req.Params)
	if err != nil {
		return fail("lookup.path: %v", err)
	}
	path, err := expandPath(cfg.Lookup.Path, externalKey, params)
	if err != nil {
		return fail("lookup.path: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(cfg))
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, joinURL(cfg.BaseURL, path), nil)
	if err != nil {
		return fail("build lookup request: %v", unwrapURLError(err))
	}
	hreq.Header.Set("Accept", "application/json")
	for name, value := range cfg.Headers {
		hreq.Header.Set(name, value)
	}
	cfg.credential.set(hreq.Header)
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(hreq.Header))
	resp, err := p.client.Do(hreq)
	if err != nil {
		return fail("lookup failed: %s", describeError(ctx, err, timeoutOf(cfg)))
	}
	defer resp.Body.Close()
	res.HTTPStatus = resp.StatusCode
	raw, readErr := readBody(resp.Body)
	res.Body = cfg.evidenceOf(raw)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		res.Status, res.At = LookupAbsent, p.now()
		return res
	case resp.StatusCode != http.StatusOK:
		return fail("lookup answered HTTP %d", resp.StatusCode)
	case readErr != nil:
		return fail("read lookup body: %v", readErr)
	}
	complete, err := cfg.lookupComplete(ctx, resp, raw)
	if err != nil {
		return fail("lookup answered HTTP 200 but %v", err)
	}
	if !complete {
		res.Status, res.At = LookupInconclusive, p.now()
		res.Error = "lookup.complete is false: the supplier says this answer is not the whole truth, so it proves neither the effect nor its absence"
		return res
	}
	refs, err := cfg.lookupMatches(ctx, resp, raw, externalKey)
	if err != nil {
		return fail("lookup answered HTTP 200 but %v", err)
	}
	res.At = p.now()
	switch len(refs) {
	case 0:
		res.Status = LookupAbsent
	case 1:
		res.Status, res.ProviderReference = LookupFound, refs[0]
	default:
		res.Status, res.References = LookupDuplicate, refs
	}
	return res
}

// lookupComplete evaluates lookup.complete on a 200 lookup answer; an
// answer is complete when the file has no lookup.complete.
func (c *Config) lookupComplete(ctx context.Context, resp *http.Response, raw []byte) (bool, error) {
	p := c.compiled.complete
	if p == nil {
		return true, nil
	}
	response, ok := celexpr.ParseJSON(raw)
	if !ok {
		return false, errors.New("the body is not valid JSON")
	}
	complete, err := p.evalBool(ctx, map[string]any{"response": response, "status": int64(resp.StatusCode), "headers": headerValues(resp.Header)})
	if err != nil {
		return false, fmt.Errorf("lookup.complete: %w", err)
	}
	return complete, nil
}

// lookupMatches reads the references of the supplier's records for key
// from a 200 lookup answer.
func (c *Config) lookupMatches(ctx context.Context, resp *http.Response, raw []byte, key string) ([]string, error) {
	response, ok := celexpr.ParseJSON(raw)
	if !ok {
		return nil, errors.New("the body is not valid JSON")
	}
	var records []any
	if p := c.compiled.matches; p != nil {
		v, err := p.evalNative(ctx, map[string]any{"response": response, "status": int64(resp.StatusCode), "headers": headerValues(resp.Header)})
		if err != nil {
			return nil, fmt.Errorf("lookup.matches: %w", err)
		}
		list, isList := v.([]any)
		if !isList {
			return nil, fmt.Errorf("lookup.matches: is a %T, not a list", v)
		}
		records = list
	} else {
		switch v := response.(type) {
		case []any:
			records = v
		case map[string]any:
			records = []any{v}
		default:
			return nil, errors.New("the body is not a JSON object or array")
		}
	}
	refs := make([]string, 0, len(records))
	for i, record := range records {
		ref, err := c.matchReference(ctx, record, key)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		refs = append(refs, ref)
	}
	return refs, nil
}

// matchReference reads one lookup record's reference: lookup.reference,
// or v1's reference_field (after checking the record's reference_param).
func (c *Config) matchReference(ctx context.Context, record any, key string) (string, error) {
	if p := c.compiled.matchReference; p != nil {
		ref, err := p.evalID(ctx, map[string]any{"match": record})
		if err != nil {
			return "", fmt.Errorf("lookup.reference: %w", err)
		}
		return ref, nil
	}
	obj, ok := record.(map[string]any)
	if !ok {
		return "", errors.New("is not a JSON object")
	}
	if c.compiled.matches == nil {
		if other, present := obj[c.ReferenceParam]; present && other != key {
			return "", fmt.Errorf("the result's %q is %s, not the looked-up key", c.ReferenceParam, truncate(fmt.Sprintf("%q", fmt.Sprint(other)), 80))
		}
	}
	v, present := obj[c.ReferenceField]
	if !present {
		return "", fmt.Errorf("body has no %q field", c.ReferenceField)
	}
	ref, err := idText(v)
	if err != nil {
		return "", fmt.Errorf("field %q %w", c.ReferenceField, err)
	}
	return ref, nil
}

// callTrace records, from httptrace callbacks that may run on transport goroutines, how far a
// request got.
type callTrace struct {
	gotConn      atomic.Bool
	wroteRequest atomic.Bool
	writeFailed  atomic.Bool
}

func (t *callTrace) clientTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { t.gotConn.Store(true) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err != nil {
				t.writeFailed.Store(true)
				return
			}
			t.wroteRequest.Store(true)
		},
	}
}

// progress describes, for evidence, how far the failed request got.
func (t *callTrace) progress() string {
	switch {
	case t.wroteRequest.Load():
		return "request fully written, no response"
	case t.writeFailed.Load():
		return "connection failed while writing the request"
	case t.gotConn.Load():
		return "connection obtained, request possibly written"
	default:
		return "request state unknown"
	}
}

// mayHaveSent decides Result.Sent after a transport error. With net/http's transport, no byte
// of the request is written before GotConn; a failure without it (connection refused, DNS
// failure, TLS handshake failure, timeout while dialing) provably sent nothing. With another
// RoundTripper only a dial error proves that.
func (p *HTTP) mayHaveSent(t *callTrace, err error) bool {
	if t.gotConn.Load() {
		return true
	}
	if p.gotConnTraced {
		return false
	}
	return !isDialError(err)
}

func isDialError(err error) bool {
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr)
}

// describeError turns a transport error into a short description without the request URL (the
// base URL could carry credentials or the query a token).
func describeError(ctx context.Context, err error, timeout time.Duration) string {
	err = unwrapURLError(err)
	if errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("timed out after %s", timeout)
	}
	return err.Error()
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err
	}
	return err
}

// readBody reads at most maxBodyRead bytes; errTooLarge marks a body cut at the cap.
func readBody(r io.Reader) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxBodyRead+1))
	if err != nil {
		return raw, fmt.Errorf("read response body: %w", err)
	}
	if len(raw) > maxBodyRead {
		return raw[:maxBodyRead], errTooLarge
	}
	return raw, nil
}

var errTooLarge = fmt.Errorf("response body larger than %d bytes, not parsed", maxBodyRead)

// evidence keeps the start of a body in a form any store accepts: at most maxBodyKept bytes, cut
// on a rune boundary, valid UTF-8, no NUL bytes (Postgres text rejects both).
func evidence(raw []byte) string {
	if len(raw) > maxBodyKept {
		cut := maxBodyKept
		for cut > maxBodyKept-utf8.UTFMax && cut > 0 && !utf8.RuneStart(raw[cut]) {
			cut--
		}
		raw = raw[:cut]
	}
	s := strings.ToValidUTF8(string(raw), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// referenceFrom extracts the provider reference from a 2xx create body.
func referenceFrom(raw []byte, readErr error, field string) (string, error) {
	if readErr != nil {
		return "", readErr
	}
	obj, err := decodeObject(raw)
	if err != nil {
		return "", err
	}
	return stringField(obj, field)
}

func decodeObject(raw []byte) (map[string]json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return nil, errors.New("body is empty")
	}
	if trimmed[0] != '{' {
		return nil, errors.New("body is not a JSON object")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		return nil, fmt.Errorf("body is not valid JSON: %w", err)
	}
	return obj, nil
}

// stringField reads a non-empty string or number field (suppliers use both for ids).
func stringField(obj map[string]json.RawMessage, field string) (string, error) {
	raw, ok := obj[field]
	if !ok {
		return "", fmt.Errorf("body has no %q field", field)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == "" {
			return "", fmt.Errorf("field %q is empty", field)
		}
		if _, err := textID(s); err != nil {
			return "", fmt.Errorf("field %q %w", field, err)
		}
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		return n.String(), nil
	}
	return "", fmt.Errorf("field %q is neither a string nor a number", field)
}

func joinURL(base, path string) string {
	return strings.TrimRight(base, "/") + path
}

func timeoutOf(cfg *Config) time.Duration {
	if cfg.Timeout.Duration > 0 {
		return cfg.Timeout.Duration
	}
	return DefaultTimeout
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
