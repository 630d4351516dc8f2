package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // list.zone names a time zone wherever actledger runs, in an image without a zoneinfo database too
	"unicode"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"

	"github.com/actledger/actledger/internal/celexpr"
	"github.com/actledger/actledger/tracing"
)

// Defaults of a reconcile section.
const (
	// DefaultReconcileWindow is how far back one scheduled run reads.
	DefaultReconcileWindow = 24 * time.Hour
	// DefaultReconcileLag keeps a run away from records the supplier may
	// still be writing: a run ends its window this long before now.
	DefaultReconcileLag = 15 * time.Minute
	// DefaultReconcileSkew is cut from both ends of the window before an
	// operation is judged missing: clocks differ, and a record is made
	// just before its answer.
	DefaultReconcileSkew = 5 * time.Minute
	// DefaultReconcileMaxPages bounds the pages one run reads.
	DefaultReconcileMaxPages = 100
	// MaxReconcileMaxPages is the most list.max_pages may be.
	MaxReconcileMaxPages = 10000
)

// The placeholders of reconcile.list.path: the window's ends, as RFC 3339
// or as unix seconds.
const (
	sincePlaceholder     = "{since}"
	untilPlaceholder     = "{until}"
	sinceUnixPlaceholder = "{since_unix}"
	untilUnixPlaceholder = "{until_unix}"
	// {since_local} and {until_local} are the ends as a date and time
	// with no offset (2006-01-02T15:04:05) in list.zone, for a supplier
	// whose filters read its own local time (Postmark's fromdate and
	// todate are Eastern time).
	sinceLocalPlaceholder = "{since_local}"
	untilLocalPlaceholder = "{until_local}"
)

// localLayout is how {since_local} and {until_local} are written.
const localLayout = "2006-01-02T15:04:05"

// Statement is how a supplier's own records are listed and compared with
// the ledger (yaml "reconcile"): the proof that what the ledger says was
// done is what the supplier holds.
type Statement struct {
	// Every is how often a run is scheduled (yaml "every"); 0: only on
	// demand.
	Every time.Duration
	// Window is how far back a scheduled run reads (yaml "window");
	// default DefaultReconcileWindow.
	Window time.Duration
	// Lag is how long before now a scheduled run's window ends (yaml
	// "lag"): records younger than that wait for the next run; default
	// DefaultReconcileLag.
	Lag time.Duration
	// Skew is cut from both ends of the window before an operation is
	// judged missing (yaml "skew"); default DefaultReconcileSkew.
	Skew time.Duration
	// MaxPages bounds the pages of one run (yaml "list.max_pages");
	// default DefaultReconcileMaxPages.
	MaxPages int
	// List is how the records are listed (yaml "list").
	List StatementList
	// Condition is the CEL expression over record and params that holds
	// when a record agrees with the operation it names (yaml "match").
	Condition string

	compiled statementPrograms
}

// StatementList is the listing request and how its answer is read, each
// expression's source as written in the file.
type StatementList struct {
	// Path is relative to the base URL (yaml "path") and takes {since},
	// {until} (RFC 3339), {since_unix}, {until_unix} (unix seconds) or
	// {since_local}, {until_local} (a date and time in Zone, no offset).
	Path string
	// Zone is the time zone of {since_local} and {until_local} (yaml
	// "zone"): an IANA name such as America/New_York; nil is UTC.
	Zone *time.Location
	// Records (over response, status, headers, since and until, the
	// window's ends as timestamps, and cursor, the params list.next gave
	// for this page, empty on the first) gives the page's records, a list
	// (yaml "records").
	Records string
	// Next (over the same) gives the query params of the next page, a map
	// of strings or nulls, empty on the last page (yaml "next").
	Next string
	// Reference, ProviderReference and Created (over record) give a
	// record's external key (null: not made through actledger), the
	// supplier's own id of it and when it was made, unix seconds or RFC
	// 3339 (yaml "reference", "provider_reference", "created").
	Reference, ProviderReference, Created string
}

// statementPrograms are a Statement's compiled expressions.
type statementPrograms struct {
	records, next                         *expr
	reference, providerReference, created *expr
	match                                 *expr
}

// StatementRecord is one supplier record of a page.
type StatementRecord struct {
	// Reference is the external key the record carries; "" when null or
	// absent (a record not made through actledger).
	Reference string
	// ProviderReference is the supplier's own id of the record.
	ProviderReference string
	// Created is when the supplier made the record.
	Created time.Time
	// Raw is the record as listed, whole.
	Raw json.RawMessage
	// Skip says why the record cannot be judged; "" when it can.
	Skip string

	record any
}

// StatementCursor is where the next page starts (list.next's query
// params); opaque to callers.
type StatementCursor struct {
	// params by name; nil removes the param from the path's query.
	params map[string]*string
}

// String is the cursor's canonical text: its params sorted by name,
// query-escaped, a removed param written as its name alone. Two cursors
// with the same text start the same page.
func (c *StatementCursor) String() string {
	if c == nil {
		return ""
	}
	parts := make([]string, 0, len(c.params))
	for _, name := range sortedKeys(c.params) {
		if v := c.params[name]; v != nil {
			parts = append(parts, url.QueryEscape(name)+"="+url.QueryEscape(*v))
		} else {
			parts = append(parts, url.QueryEscape(name))
		}
	}
	return strings.Join(parts, "&")
}

// values are the cursor's params as list.records and list.next read them
// (variable cursor): a removed param is null; empty for the first page.
func (c *StatementCursor) values() map[string]any {
	out := map[string]any{}
	if c == nil {
		return out
	}
	for name, v := range c.params {
		if v == nil {
			out[name] = nil
		} else {
			out[name] = *v
		}
	}
	return out
}

// StatementPage is one page of a listing.
type StatementPage struct {
	Records []StatementRecord
	// Next is nil when this was the last page.
	Next *StatementCursor
}

// StatementError is a listing that failed: the supplier refused or did
// not answer, or its answer is not what the reconcile expressions read.
// Status is the HTTP status of an answer, 0 when there was none.
type StatementError struct {
	Status int
	Reason string
	// Err is the cause, where there is one (a transport error, an
	// expression's failure).
	Err error
}

// Error formats as `reconcile list: HTTP 429: …`.
func (e *StatementError) Error() string {
	if e.Status > 0 {
		return fmt.Sprintf("reconcile list: HTTP %d: %s", e.Status, e.Reason)
	}
	return "reconcile list: " + e.Reason
}

// Unwrap exposes the cause.
func (e *StatementError) Unwrap() error { return e.Err }

// maxExcerpt bounds the body quoted in a StatementError.
const maxExcerpt = 200

// reconcileYAML mirrors the reconcile: section.
type reconcileYAML struct {
	List   reconcileListYAML `yaml:"list"`
	Match  string            `yaml:"match"`
	Every  *string           `yaml:"every"`
	Window *string           `yaml:"window"`
	Lag    *string           `yaml:"lag"`
	Skew   *string           `yaml:"skew"`
}

type reconcileListYAML struct {
	Path              string `yaml:"path"`
	Zone              string `yaml:"zone"`
	Records           string `yaml:"records"`
	Next              string `yaml:"next"`
	MaxPages          *int   `yaml:"max_pages"`
	Reference         string `yaml:"reference"`
	ProviderReference string `yaml:"provider_reference"`
	Created           string `yaml:"created"`
}

// statement converts the reconcile section; every may be 0 (only on
// demand), the other durations must be positive when given.
func (y *reconcileYAML) statement(c *conversion) *Statement {
	if y == nil {
		return nil
	}
	var zone *time.Location
	if name := strings.TrimSpace(y.List.Zone); name != "" {
		loc, err := time.LoadLocation(name)
		if err != nil {
			c.bad("reconcile.list.zone", fmt.Errorf("is not a time zone: %w", err))
		} else {
			zone = loc
		}
	}
	return &Statement{
		Every:    c.duration("reconcile.every", y.Every, false).Duration,
		Window:   c.duration("reconcile.window", y.Window, true).Duration,
		Lag:      c.duration("reconcile.lag", y.Lag, true).Duration,
		Skew:     c.duration("reconcile.skew", y.Skew, true).Duration,
		MaxPages: c.count("reconcile.list.max_pages", y.List.MaxPages),
		List: StatementList{
			Path:              strings.TrimSpace(y.List.Path),
			Zone:              zone,
			Records:           strings.TrimSpace(y.List.Records),
			Next:              strings.TrimSpace(y.List.Next),
			Reference:         strings.TrimSpace(y.List.Reference),
			ProviderReference: strings.TrimSpace(y.List.ProviderReference),
			Created:           strings.TrimSpace(y.List.Created),
		},
		Condition: strings.TrimSpace(y.Match),
	}
}

// withDefaults is a copy of s with its defaults filled.
func (s *Statement) withDefaults() *Statement {
	out := *s
	out.Window = cmp.Or(out.Window, DefaultReconcileWindow)
	out.Lag = cmp.Or(out.Lag, DefaultReconcileLag)
	out.Skew = cmp.Or(out.Skew, DefaultReconcileSkew)
	out.MaxPages = cmp.Or(out.MaxPages, DefaultReconcileMaxPages)
	return &out
}

// validate reports the problems of a defaults-filled reconcile section
// of provider c that need no compiling.
func (s *Statement) validate(c *Config) []*FieldError {
	var errs []*FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Provider: c.Name, Field: "reconcile." + field, Err: fmt.Errorf(format, args...)})
	}
	if c.Tenant == "" {
		errs = append(errs, &FieldError{Provider: c.Name, Field: "tenant", Err: errors.New(
			"is required for a provider with reconcile: its runs, findings and unexplained records belong to this tenant, and are never shown to other tenants")})
	}
	if err := checkListPath(s.List.Path); err != nil {
		bad("list.path", "%v", err)
	}
	for _, d := range []struct {
		field string
		value time.Duration
	}{{"every", s.Every}, {"window", s.Window}, {"lag", s.Lag}, {"skew", s.Skew}} {
		if d.value < 0 {
			bad(d.field, "must not be negative, got %s", d.value)
		}
	}
	if s.MaxPages > MaxReconcileMaxPages {
		bad("list.max_pages", "must be at most %d, got %d", MaxReconcileMaxPages, s.MaxPages)
	}
	if s.Window <= 2*s.Skew {
		bad("window", "(%s) must be longer than twice reconcile.skew (%s): otherwise no operation is ever judged missing", short(s.Window), short(s.Skew))
	}
	if s.Every > 0 && s.Every > s.Window {
		bad("every", "(%s) must not be longer than reconcile.window (%s): records made between two runs would never be read", short(s.Every), short(s.Window))
	}
	return errs
}

// checkListPath checks list.path: relative to the base URL, holding only
// the window's placeholders, and bounded below by the window's start.
func checkListPath(path string) error {
	switch {
	case path == "":
		return errors.New("is required with reconcile")
	case !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//"):
		return fmt.Errorf("must be a path relative to base_url starting with one \"/\", got %q", path)
	case strings.Contains(path, "#"):
		return fmt.Errorf("must not hold a fragment (#), got %q", path)
	}
	rest := path
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			break
		}
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			return errors.New("has a \"{\" that is not closed")
		}
		switch p := rest[i : i+end+1]; p {
		case sincePlaceholder, untilPlaceholder, sinceUnixPlaceholder, untilUnixPlaceholder, sinceLocalPlaceholder, untilLocalPlaceholder:
		default:
			return fmt.Errorf("may hold only {since}, {until}, {since_unix}, {until_unix}, {since_local} and {until_local}, not %s", p)
		}
		rest = rest[i+end+1:]
	}
	if !strings.Contains(path, sincePlaceholder) && !strings.Contains(path, sinceUnixPlaceholder) && !strings.Contains(path, sinceLocalPlaceholder) {
		return errors.New("must hold {since}, {since_unix} or {since_local}: without a window's start every run would list the supplier's records from the beginning")
	}
	return nil
}

// kindsCreated are the types list.created may give.
var kindsCreated = []types.Kind{types.IntKind, types.UintKind, types.DoubleKind, types.StringKind}

// kindsReference are the types list.reference may give.
var kindsReference = []types.Kind{types.StringKind, types.NullTypeKind}

// compile compiles the reconcile expressions; each is required.
func (s *Statement) compile(e exprEnvs) []fieldProblem {
	var problems []fieldProblem
	p := &s.compiled
	for _, f := range []struct {
		field, src string
		into       **expr
		env        *cel.Env
		what       string
		kinds      []types.Kind
	}{
		{"reconcile.list.records", s.List.Records, &p.records, e.listing, "a list", kindsList},
		{"reconcile.list.next", s.List.Next, &p.next, e.listing, "a map", kindsMap},
		{"reconcile.list.reference", s.List.Reference, &p.reference, e.record, "a string or null", kindsReference},
		{"reconcile.list.provider_reference", s.List.ProviderReference, &p.providerReference, e.record, "a string or an integer", kindsID},
		{"reconcile.list.created", s.List.Created, &p.created, e.record, "unix seconds or an RFC 3339 string", kindsCreated},
		{"reconcile.match", s.Condition, &p.match, e.compare, "a bool", kindsBool},
	} {
		if f.src == "" {
			problems = append(problems, fieldProblem{f.field, errors.New("is required with reconcile")})
			continue
		}
		prg, err := compileExpr(f.env, f.src, f.what, f.kinds)
		if err != nil {
			problems = append(problems, fieldProblem{f.field, err})
			continue
		}
		*f.into = prg
	}
	return problems
}

// Match evaluates reconcile.match with record (the listed record) and
// params (the operation's params object) in scope.
func (s *Statement) Match(rec StatementRecord, params json.RawMessage) (bool, error) {
	if s.compiled.match == nil {
		return false, errors.New("reconcile.match is not compiled (the statement did not come from a registry)")
	}
	record := rec.record
	if record == nil {
		v, ok := celexpr.ParseJSON(rec.Raw)
		if !ok {
			return false, errors.New("reconcile.match: the record is not JSON")
		}
		record = v
	}
	p, err := paramsObject(params)
	if err != nil {
		return false, fmt.Errorf("reconcile.match: %w", err)
	}
	ok, err := s.compiled.match.evalBool(context.Background(), map[string]any{"record": record, "params": p})
	if err != nil {
		return false, fmt.Errorf("reconcile.match: %w", err)
	}
	return ok, nil
}

// Describe says in plain words what a run compares and how often.
func (s *Statement) Describe() string {
	when := "only on demand (actledger reconcile)"
	if s.Every > 0 {
		when = "every " + short(s.Every)
	}
	return fmt.Sprintf("%s, reads the supplier's records created in the %s up to %s ago (GET %s, at most %d pages) and matches each to an operation by its reference; "+
		"a record whose match (%s) is false goes to a person (effect_mismatch), two records for one operation too (duplicate_effect), "+
		"a record naming an open outcome settles it succeeded; an operation that succeeded inside the window less %s at each end and has no record goes to a person (effect_missing)",
		when, short(s.Window), short(s.Lag), s.List.Path, s.MaxPages, strings.Join(strings.Fields(s.Condition), " "), short(s.Skew))
}

// short writes d as a person would: 24h, 1m30s, 2m.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ListPage GETs one page of the supplier's records created in
// [since, until) with the provider's base_url, auth and timeout: the first
// page when cursor is nil (list.path with {since}/{until} as RFC 3339 and
// {since_unix}/{until_unix} as unix seconds, query-escaped; since rounded
// down and until up to the second, so the window is never narrowed), else
// list.path with the cursor's params set on its query (replacing params of
// the same name; a null removes that param). A record the expressions
// cannot read comes back with Skip set; a page that cannot be read at all
// is a *StatementError.
func (p *HTTP) ListPage(ctx context.Context, since, until time.Time, cursor *StatementCursor) (StatementPage, error) {
	ctx, span := p.startCall(ctx, "provider list", http.MethodGet)
	page, status, err := p.listPage(ctx, since, until, cursor)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("actledger.records", len(page.Records)))
		errText := ""
		if err != nil {
			errText = err.Error()
		}
		if err != nil || status != 0 {
			endCall(span, status, errText)
		}
	}
	span.End()
	return page, err
}

func (p *HTTP) listPage(ctx context.Context, since, until time.Time, cursor *StatementCursor) (StatementPage, int, error) {
	cfg := p.cfg
	s := cfg.Reconcile
	fail := func(status int, err error, format string, args ...any) (StatementPage, int, error) {
		return StatementPage{}, status, &StatementError{Status: status, Reason: fmt.Sprintf(format, args...), Err: err}
	}
	if s == nil || s.compiled.records == nil {
		return fail(0, nil, "provider %q has no compiled reconcile section", cfg.Name)
	}
	path := listPath(s.List.Path, since, until, s.List.Zone)
	if cursor != nil {
		path = withParams(path, cursor.params)
	}
	ctx, cancel := context.WithTimeout(ctx, timeoutOf(cfg))
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, joinURL(cfg.BaseURL, path), nil)
	if err != nil {
		err = unwrapURLError(err)
		return fail(0, err, "build request: %v", err)
	}
	hreq.Header.Set("Accept", "application/json")
	for name, value := range cfg.Headers {
		hreq.Header.Set(name, value)
	}
	cfg.credential.set(hreq.Header)
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(hreq.Header))
	resp, err := p.client.Do(hreq)
	if err != nil {
		return fail(0, err, "no answer: %s", describeError(ctx, err, timeoutOf(cfg)))
	}
	defer resp.Body.Close()
	raw, readErr := readBody(resp.Body)
	status := resp.StatusCode
	if status < 200 || status > 299 {
		return fail(status, nil, "the supplier refused the listing: %s", excerpt(raw))
	}
	if readErr != nil {
		return fail(status, readErr, "%v", readErr)
	}
	response, ok := celexpr.ParseJSON(raw)
	if !ok {
		return fail(status, nil, "the body is not JSON: %s", excerpt(raw))
	}
	vars := map[string]any{"response": response, "status": int64(status), "headers": headerValues(resp.Header),
		"since": since.UTC(), "until": until.UTC(), "cursor": cursor.values()}
	v, err := s.compiled.records.evalNative(ctx, vars)
	if err != nil {
		return fail(status, err, "reconcile.list.records: %v", err)
	}
	list, isList := v.([]any)
	if !isList {
		return fail(status, nil, "reconcile.list.records: is %s, not a list", kindOf(v))
	}
	next, err := s.compiled.next.evalNative(ctx, vars)
	if err != nil {
		return fail(status, err, "reconcile.list.next: %v", err)
	}
	params, err := cursorParams(next)
	if err != nil {
		return fail(status, err, "reconcile.list.next: %v", err)
	}
	page := StatementPage{Records: make([]StatementRecord, 0, len(list))}
	if len(params) > 0 {
		page.Next = &StatementCursor{params: params}
	}
	for _, record := range list {
		page.Records = append(page.Records, s.readRecord(ctx, record))
	}
	return page, status, nil
}

// readRecord reads one listed record; what cannot be read is its Skip.
func (s *Statement) readRecord(ctx context.Context, record any) StatementRecord {
	rec := StatementRecord{record: record}
	raw, err := json.Marshal(record)
	if err != nil {
		rec.Skip = fmt.Sprintf("the record cannot be written as JSON: %v", err)
		return rec
	}
	rec.Raw = raw
	vars := map[string]any{"record": record}
	skip := func(format string, args ...any) StatementRecord {
		rec.Skip = fmt.Sprintf(format, args...)
		return rec
	}
	ref, err := s.compiled.reference.evalNative(ctx, vars)
	if err != nil {
		return skip("reconcile.list.reference failed on it: %v", err)
	}
	switch ref := ref.(type) {
	case nil:
	case string:
		if err := checkText(ref); err != nil {
			return skip("its reference %v", err)
		}
		rec.Reference = ref
	default:
		return skip("its reference is %s, not a string", kindOf(ref))
	}
	prov, err := s.compiled.providerReference.evalNative(ctx, vars)
	if err != nil {
		return skip("reconcile.list.provider_reference failed on it: %v", err)
	}
	switch pv := prov.(type) {
	case string:
		if pv == "" {
			return skip("its provider reference is an empty string")
		}
		if err := checkText(pv); err != nil {
			return skip("its provider reference %v", err)
		}
		rec.ProviderReference = pv
	case int64, uint64:
		rec.ProviderReference = fmt.Sprint(pv)
	case nil:
		return skip("its provider reference is null")
	default:
		return skip("its provider reference is %s, not a string", kindOf(pv))
	}
	created, err := s.compiled.created.evalNative(ctx, vars)
	if err != nil {
		return skip("reconcile.list.created failed on it: %v", err)
	}
	if rec.Created, err = createdTime(created); err != nil {
		return skip("its created time %v", err)
	}
	return rec
}

// checkText checks a reference as the ledger stores it: at most
// maxIDLength bytes of UTF-8 without control characters.
func checkText(s string) error {
	switch {
	case len(s) > maxIDLength:
		return fmt.Errorf("is longer than %d bytes (%d)", maxIDLength, len(s))
	case !utf8.ValidString(s):
		return errors.New("is not UTF-8")
	case strings.ContainsFunc(s, unicode.IsControl):
		return errors.New("holds control characters")
	}
	return nil
}

// createdTime reads list.created: unix seconds (a number) or an RFC 3339
// string.
func createdTime(v any) (time.Time, error) {
	switch v := v.(type) {
	case nil:
		return time.Time{}, errors.New("is absent (null)")
	case int64:
		return time.Unix(v, 0).UTC(), nil
	case uint64:
		if v > math.MaxInt64 {
			return time.Time{}, fmt.Errorf("is the number %d, too large for unix seconds", v)
		}
		return time.Unix(int64(v), 0).UTC(), nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1<<53 {
			return time.Time{}, fmt.Errorf("is the number %v, not unix seconds", v)
		}
		sec, frac := math.Modf(v)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
	case string:
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time", truncate(v, 64))
		}
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("is %s, not unix seconds or an RFC 3339 string", kindOf(v))
}

// cursorParams reads list.next: a map of param names to strings (set) or
// nulls (removed); empty on the last page.
func cursorParams(v any) (map[string]*string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("is %s, not a map", kindOf(v))
	}
	out := make(map[string]*string, len(m))
	for _, name := range sortedKeys(m) {
		switch value := m[name].(type) {
		case nil:
			out[name] = nil
		case string:
			out[name] = &value
		default:
			return nil, fmt.Errorf("%q is %s: every value must be a string or null (write string(...) for a number)", name, kindOf(value))
		}
	}
	return out, nil
}

// listPath is list.path with the window's ends substituted ({since_local}
// and {until_local} in zone, UTC when nil).
func listPath(path string, since, until time.Time, zone *time.Location) string {
	if zone == nil {
		zone = time.UTC
	}
	since = since.UTC().Truncate(time.Second)
	if u := until.UTC(); u.Truncate(time.Second).Equal(u) {
		until = u
	} else {
		until = u.Truncate(time.Second).Add(time.Second)
	}
	return strings.NewReplacer(
		sincePlaceholder, url.QueryEscape(since.Format(time.RFC3339)),
		untilPlaceholder, url.QueryEscape(until.Format(time.RFC3339)),
		sinceUnixPlaceholder, strconv.FormatInt(since.Unix(), 10),
		untilUnixPlaceholder, strconv.FormatInt(until.Unix(), 10),
		sinceLocalPlaceholder, url.QueryEscape(since.In(zone).Format(localLayout)),
		untilLocalPlaceholder, url.QueryEscape(until.In(zone).Format(localLayout)),
	).Replace(path)
}

// withParams sets params on path's query: a param of the same name is
// replaced (a nil value removes it), the others keep their order and
// spelling, the new ones follow sorted by name.
func withParams(path string, params map[string]*string) string {
	base, query, _ := strings.Cut(path, "?")
	var kept []string
	for pair := range strings.SplitSeq(query, "&") {
		if pair == "" {
			continue
		}
		rawName, _, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(rawName)
		if err != nil {
			name = rawName
		}
		if _, replaced := params[name]; replaced {
			continue
		}
		kept = append(kept, pair)
	}
	for _, name := range sortedKeys(params) {
		if v := params[name]; v != nil {
			kept = append(kept, url.QueryEscape(name)+"="+url.QueryEscape(*v))
		}
	}
	if len(kept) == 0 {
		return base
	}
	return base + "?" + strings.Join(kept, "&")
}

// excerpt is the start of a body for an error: bounded, one line, valid
// UTF-8.
func excerpt(raw []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(raw), "\uFFFD")), " ")
	if s == "" {
		return "(empty body)"
	}
	return truncate(s, maxExcerpt)
}

// kindOf names a decoded JSON value's kind in words.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a bool"
	case int64, uint64, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	}
	return fmt.Sprintf("a %T", v)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
