package mocksupplier

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/fault"
)

// The statement: GET /v1/statement lists the orders created in a window, oldest first, a page at
// a time, so that a reconciliation can compare the ledger with the supplier's own records. It
// reads the same store the create path writes, so every order a create made (and every order a
// seeding helper placed) is on it, whatever its creator was told.
//
//	GET /v1/statement?created_gte=T&created_lt=T&limit=N&after=CURSOR
//
// created_gte and created_lt are RFC 3339 times or unix seconds, each optional (no bound);
// limit is 1..MaxStatementLimit, default DefaultStatementLimit; after is the next of the page
// before. The answer is {"orders":[Order...],"next":CURSOR|null}: next is null on the last page.
// Orders are ordered by (created_at, id), and a cursor carries that key itself, so a page after
// an order that has since been removed still starts in the right place. Unlike the lookup by
// reference, the statement ignores the lookup lag: a reconciliation waits out the lag itself.

// DefaultStatementLimit and MaxStatementLimit bound a statement page.
const (
	DefaultStatementLimit = 100
	MaxStatementLimit     = 100
)

// StatementPage is the answer of GET /v1/statement.
type StatementPage struct {
	Orders []Order `json:"orders"`
	// Next is the after of the next page; nil on the last one.
	Next *string `json:"next"`
}

// StatementFaultKind names one way a statement page misbehaves. The values are the ones the admin
// API accepts.
type StatementFaultKind string

const (
	// PageNotJSON answers 200 with a body that is not JSON.
	PageNotJSON StatementFaultKind = "page_not_json"
	// PageUnauthorized401 answers 401, as after rotated credentials.
	PageUnauthorized401 StatementFaultKind = "page_401"
	// PageRateLimit429 answers 429 with Retry-After.
	PageRateLimit429 StatementFaultKind = "page_429"
	// PageError500 answers 500.
	PageError500 StatementFaultKind = "page_500"
	// PageLoop answers the page it was asked for with next set to the after it was given, and
	// from then on answers every request with that after the same way: a client that follows
	// next never leaves it. It needs a page after the first (Page >= 2), the first having no
	// after to return.
	PageLoop StatementFaultKind = "page_loop"
	// PageSlow answers the page StatementFault.MS milliseconds late.
	PageSlow StatementFaultKind = "page_slow"
)

// StatementFault is one queued misbehaviour of a statement page.
type StatementFault struct {
	Kind StatementFaultKind `json:"kind"`
	// Page is the page it strikes, counted from 1 since the last request without after (the
	// first page of a run); 0 strikes the next page whichever it is. A fault for a later page
	// waits at the head of the queue until that page is asked for.
	Page int `json:"page,omitempty"`
	// MS is the wait of PageSlow.
	MS int `json:"ms,omitempty"`
	// RetryAfterS is the Retry-After of PageRateLimit429, in seconds; 0 means 1.
	RetryAfterS int `json:"retry_after_s,omitempty"`
}

func (f StatementFault) validate() error {
	switch f.Kind {
	case PageNotJSON, PageUnauthorized401, PageRateLimit429, PageError500, PageSlow:
	case PageLoop:
		if f.Page < 2 {
			return fmt.Errorf("statement fault %s needs page >= 2, got %d", f.Kind, f.Page)
		}
	default:
		return fmt.Errorf("unknown statement fault kind %q", f.Kind)
	}
	if f.Page < 0 || f.MS < 0 || f.RetryAfterS < 0 {
		return fmt.Errorf("statement fault %s: page, ms and retry_after_s must not be negative", f.Kind)
	}
	return nil
}

// SetStatementFaults replaces the queue of statement faults, taken head first, one per page it
// names, and ends a loop PageLoop started; none clears both. It panics on an invalid fault, which
// is a bug in the calling test.
func (s *Server) SetStatementFaults(faults ...StatementFault) {
	for _, f := range faults {
		if err := f.validate(); err != nil {
			panic("mocksupplier: SetStatementFaults: " + err.Error())
		}
	}
	s.mu.Lock()
	s.statement.faults.Set(faults...)
	s.statement.loop = ""
	s.mu.Unlock()
}

// Generated makes the statement list Count orders computed from their index instead of the
// stored ones, for the benchmark's large window: order i (from 0) has id GeneratedID(i),
// client_reference ReferencePrefix+i, created_at Start + i*Every, and Params. Nothing per order
// is stored: a page is computed from the window's bounds and the cursor by arithmetic, so the
// memory a request takes is its page (the records it encodes), whatever Count is, and no state
// is held between requests.
type Generated struct {
	Count           int
	Start           time.Time
	Every           time.Duration
	ReferencePrefix string
	Params          json.RawMessage
	// Adjust, when set, changes order i after it was computed (its reference, its params; not its
	// id or its time, which the cursor is computed from), so that a large window can hold what a reconciliation must find among its matches: a
	// second order naming one reference, params that differ, a reference nothing made, no
	// reference at all. It must depend on i alone: a page is computed again whenever it is asked
	// for.
	Adjust func(i int, o *Order)
}

// GeneratedID is the id of generated order i.
func GeneratedID(i int) string { return fmt.Sprintf("ord_gen%08d", i) }

// SetGenerated makes the statement serve g's orders (nil: the stored orders again). Creates,
// lookups and the admin listing still see only the stored orders. It panics on a Count below 0
// or an Every not above 0.
func (s *Server) SetGenerated(g *Generated) {
	if g != nil {
		if g.Count < 0 || g.Every <= 0 {
			panic(fmt.Sprintf("mocksupplier: SetGenerated: count %d, every %v", g.Count, g.Every))
		}
		c := *g
		if len(c.Params) == 0 {
			c.Params = json.RawMessage("{}")
		}
		g = &c
	}
	s.mu.Lock()
	s.statement.generated = g
	s.mu.Unlock()
}

// statementState is what the statement keeps between requests: its faults, the page count of the
// current run, a loop's cursor and the generated mode. None of it grows with the window.
type statementState struct {
	faults    fault.Queue[StatementFault]
	page      int
	loop      string
	generated *Generated
}

// errBadStatementQuery is a query the statement refuses with 400.
var errBadStatementQuery = errors.New("bad statement query")

// statementQuery is a parsed GET /v1/statement.
type statementQuery struct {
	gte, lt  time.Time // zero: no bound
	limit    int
	after    string
	afterKey orderKey
}

// orderKey is where an order sits on the statement.
type orderKey struct {
	created time.Time
	id      string
}

func (k orderKey) compare(o orderKey) int {
	if c := k.created.Compare(o.created); c != 0 {
		return c
	}
	return strings.Compare(k.id, o.id)
}

func keyOf(o *Order) orderKey { return orderKey{created: o.CreatedAt, id: o.ID} }

// cursor is the opaque after of the page that follows the order at k.
func (k orderKey) cursor() string {
	return strconv.FormatInt(k.created.UnixNano(), 10) + "." + k.id
}

func parseCursor(c string) (orderKey, error) {
	nanos, id, ok := strings.Cut(c, ".")
	n, err := strconv.ParseInt(nanos, 10, 64)
	if !ok || err != nil || id == "" {
		return orderKey{}, fmt.Errorf("%w: after %q is not a cursor this statement gave", errBadStatementQuery, c)
	}
	return orderKey{created: time.Unix(0, n).UTC(), id: id}, nil
}

// parseStatementTime reads an RFC 3339 time or unix seconds.
func parseStatementTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Unix(secs, 0).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s must be RFC 3339 or unix seconds, got %q", errBadStatementQuery, name, v)
	}
	return t, nil
}

func parseStatementQuery(r *http.Request) (statementQuery, error) {
	q := r.URL.Query()
	var sq statementQuery
	var err error
	if sq.gte, err = parseStatementTime("created_gte", q.Get("created_gte")); err != nil {
		return sq, err
	}
	if sq.lt, err = parseStatementTime("created_lt", q.Get("created_lt")); err != nil {
		return sq, err
	}
	sq.limit = DefaultStatementLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxStatementLimit {
			return sq, fmt.Errorf("%w: limit must be 1..%d, got %q", errBadStatementQuery, MaxStatementLimit, v)
		}
		sq.limit = n
	}
	if sq.after = q.Get("after"); sq.after != "" {
		if sq.afterKey, err = parseCursor(sq.after); err != nil {
			return sq, err
		}
	}
	return sq, nil
}

// inWindow reports whether t is in [gte, lt).
func (sq statementQuery) inWindow(t time.Time) bool {
	return (sq.gte.IsZero() || !t.Before(sq.gte)) && (sq.lt.IsZero() || t.Before(sq.lt))
}

// handleStatement serves GET /v1/statement.
func (s *Server) handleStatement(w http.ResponseWriter, r *http.Request) {
	sq, err := parseStatementQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_query", err.Error())
		return
	}
	s.mu.Lock()
	if sq.after == "" {
		s.statement.page = 1
	} else {
		s.statement.page++
	}
	page := s.statement.page
	looping := sq.after != "" && sq.after == s.statement.loop
	taken, faulty := s.statement.faults.TakeIf(func(f StatementFault) bool { return f.Page == 0 || f.Page == page })
	if faulty && taken.Kind == PageLoop {
		s.statement.loop = sq.after
		looping = true
	}
	var out StatementPage
	if g := s.statement.generated; g != nil {
		out = g.page(sq)
	} else {
		out = s.orders.page(sq)
	}
	s.mu.Unlock()

	if faulty {
		s.log.InfoContext(r.Context(), "statement fault injected", "fault", string(taken.Kind), "page", page)
		switch taken.Kind {
		case PageNotJSON:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("<html><body>maintenance</body></html>"))
			return
		case PageUnauthorized401:
			writeError(w, http.StatusUnauthorized, "unauthorized", "invalid API credentials")
			return
		case PageRateLimit429:
			w.Header().Set("Retry-After", strconv.Itoa(cmp.Or(taken.RetryAfterS, 1)))
			writeError(w, http.StatusTooManyRequests, "rate_limited", "too many requests")
			return
		case PageError500:
			writeError(w, http.StatusInternalServerError, "internal", "internal server error")
			return
		case PageSlow:
			fault.Hold(r.Context(), time.Duration(taken.MS)*time.Millisecond)
		}
	}
	if looping {
		next := sq.after
		out.Next = &next
	}
	writeJSON(w, http.StatusOK, out)
}

// page is the stored orders' page for sq. It scans every order (a test double's store, a few
// thousand orders at most; the benchmark's large window is Generated). s.mu is held.
func (st *orderStore) page(sq statementQuery) StatementPage {
	var hits []*Order
	for _, o := range st.all {
		if sq.inWindow(o.CreatedAt) && (sq.after == "" || keyOf(o).compare(sq.afterKey) > 0) {
			hits = append(hits, o)
		}
	}
	slices.SortFunc(hits, func(a, b *Order) int { return keyOf(a).compare(keyOf(b)) })
	out := StatementPage{Orders: make([]Order, 0, min(len(hits), sq.limit))}
	for _, o := range hits[:min(len(hits), sq.limit)] {
		out.Orders = append(out.Orders, *o)
	}
	if len(hits) > sq.limit {
		next := keyOf(hits[sq.limit-1]).cursor()
		out.Next = &next
	}
	return out
}

// created is when generated order i was created.
func (g *Generated) created(i int) time.Time { return g.Start.Add(time.Duration(i) * g.Every).UTC() }

// firstAtOrAfter is the index of the first generated order created at or after t.
func (g *Generated) firstAtOrAfter(t time.Time) int {
	if !t.After(g.Start) {
		return 0
	}
	d := t.Sub(g.Start)
	i := int(d / g.Every)
	if d%g.Every != 0 {
		i++
	}
	return min(i, g.Count)
}

// page computes the generated orders' page for sq from the bounds alone.
func (g *Generated) page(sq statementQuery) StatementPage {
	lo, hi := 0, g.Count
	if !sq.gte.IsZero() {
		lo = g.firstAtOrAfter(sq.gte)
	}
	if !sq.lt.IsZero() {
		hi = g.firstAtOrAfter(sq.lt)
	}
	if sq.after != "" {
		// The first order whose key is above the cursor's: orders at the cursor's time with a
		// larger id, else those after it.
		i := g.firstAtOrAfter(sq.afterKey.created)
		for i < g.Count && g.created(i).Equal(sq.afterKey.created) && GeneratedID(i) <= sq.afterKey.id {
			i++
		}
		lo = max(lo, i)
	}
	out := StatementPage{Orders: []Order{}}
	for i := lo; i < hi && len(out.Orders) < sq.limit; i++ {
		o := Order{
			ID: GeneratedID(i), ClientReference: g.ReferencePrefix + strconv.Itoa(i), Status: "created",
			CreatedAt: g.created(i), Params: g.Params,
		}
		if g.Adjust != nil {
			g.Adjust(i, &o)
		}
		out.Orders = append(out.Orders, o)
	}
	if end := lo + len(out.Orders); end < hi {
		next := orderKey{created: g.created(end - 1), id: GeneratedID(end - 1)}.cursor()
		out.Next = &next
	}
	return out
}
