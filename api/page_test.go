package api_test

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/ledger"
)

// queryCounter counts the statements a pool runs.
type queryCounter struct{ n atomic.Int64 }

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// countingPool is a fresh database behind a pool whose statements are
// counted.
func countingPool(t *testing.T) (*pgxpool.Pool, *queryCounter) {
	t.Helper()
	_, dbURL := testdb.NewWithURL(t)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	counter := &queryCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, counter
}

// pageAll follows next_cursor from path (which has a limit) and returns
// every page's items under key.
func (f *fixture) pageAll(t *testing.T, path, token, key string, limit int) [][]map[string]any {
	t.Helper()
	var pages [][]map[string]any
	cursor := ""
	for range 100 {
		u := fmt.Sprintf("%s?limit=%d", path, limit)
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		r := f.do(t, "GET", u, token, nil)
		if r.status != 200 {
			t.Fatalf("GET %s: %d %s", u, r.status, r.raw)
		}
		list, _ := r.body[key].([]any)
		page := make([]map[string]any, len(list))
		for i, x := range list {
			page[i], _ = x.(map[string]any)
		}
		pages = append(pages, page)
		cursor = r.str("next_cursor")
		if cursor == "" {
			return pages
		}
		if len(page) != limit {
			t.Fatalf("a page with next_cursor holds %d items, want the limit %d", len(page), limit)
		}
	}
	t.Fatal("next_cursor never ends")
	return nil
}

// inReview moves a fresh operation to review and returns its id.
func (f *fixture) inReview(t *testing.T, key string) uuid.UUID {
	t.Helper()
	id := uuid.MustParse(f.queuedOperation(t, key))
	op, err := f.store.Get(context.Background(), ledger.WholeTenant(f.tenantID(t)), id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Transition(context.Background(), ledger.Change{
		ID: id, From: op.Status, Version: op.Version, To: ledger.StatusReview, Kind: "test", Actor: "test",
		Review: &ledger.Review{Reason: ledger.ReasonOutcomeUnknown, Owner: "ops", Deadline: time.Now().Add(time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

func (f *fixture) tenantID(t *testing.T) uuid.UUID {
	t.Helper()
	p, err := f.tokens.Authenticate(context.Background(), f.agent)
	if err != nil {
		t.Fatal(err)
	}
	return p.TenantID
}

// TestReviewListIsPagedAndCostsTheSameQueriesPerPage: GET /v1/review pages
// through operations in review and then unmatched evidence with limit and
// next_cursor, listing each item exactly once; a page costs the same
// number of queries whatever it holds (it used to read each item's
// history and approval one by one, three queries per item, and list
// everything at once).
func TestReviewListIsPagedAndCostsTheSameQueriesPerPage(t *testing.T) {
	t.Parallel()
	pool, counter := countingPool(t)
	f := setupWithPool(t, pool)
	tenant := f.tenantID(t)
	want := map[string]bool{}
	for i := range 7 {
		want[f.inReview(t, fmt.Sprintf("po-%d", i)).String()] = true
	}
	for i := range 4 {
		recorded, err := f.store.RecordUnmatched(context.Background(), ledger.Unmatched{
			TenantID: &tenant, Provider: "acme", Source: fmt.Sprintf("webhook:%d", i), Reference: fmt.Sprintf("ref-%d", i),
			Status: "succeeded", Owner: "ops", Deadline: time.Now().Add(time.Hour),
		}, "acme-corp")
		if err != nil || !recorded {
			t.Fatalf("record unmatched: %v %v", recorded, err)
		}
	}

	for _, limit := range []int{1, 3, 7, 11, 500} {
		pages := f.pageAll(t, "/v1/review", f.operator, "items", limit)
		seen := map[string]int{}
		evidence := 0
		for _, page := range pages {
			for _, item := range page {
				if id, ok := item["operation_id"].(string); ok {
					if evidence > 0 {
						t.Errorf("limit %d: operation %s after evidence; operations come first", limit, id)
					}
					seen[id]++
					continue
				}
				evidence++
				seen[fmt.Sprint(item["evidence_id"])]++
			}
		}
		for id := range want {
			if seen[id] != 1 {
				t.Errorf("limit %d: operation %s listed %d times, want 1", limit, id, seen[id])
			}
		}
		if len(seen) != 11 || evidence != 4 {
			t.Errorf("limit %d: %d distinct items (%d evidence), want 11 (4)", limit, len(seen), evidence)
		}
	}

	queries := func(limit int) int64 {
		before := counter.n.Load()
		if r := f.do(t, "GET", fmt.Sprintf("/v1/review?limit=%d", limit), f.operator, nil); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		return counter.n.Load() - before
	}
	// Pages of operations only, then pages that reach the evidence: the
	// same count whatever the size, and at most the token, the operations,
	// their histories, their approvals and the evidence.
	for _, sizes := range [][2]int{{2, 6}, {8, 11}} {
		small, large := queries(sizes[0]), queries(sizes[1])
		if small != large || large > 5 {
			t.Errorf("a page of %d items took %d queries, a page of %d took %d; want the same, at most 5 (no query per item)",
				sizes[0], small, sizes[1], large)
		}
	}
}

// TestListsRefuseLimitsOutOfRangeAndForeignCursors: limit is 1 to 500 (more
// is a 400, never a silent cut), and a cursor works only for its own list.
func TestListsRefuseLimitsOutOfRangeAndForeignCursors(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.queuedOperation(t, "po-1")
	for _, path := range []string{"/v1/review", "/v1/operations/" + id + "/events", "/v1/dispatch"} {
		for _, q := range []string{"limit=0", "limit=501", "limit=-1", "limit=x", "cursor=not-a-cursor"} {
			r := f.do(t, "GET", path+"?"+q, f.operator, nil)
			if r.status != 400 {
				t.Errorf("GET %s?%s: %d %s, want 400", path, q, r.status, r.raw)
			}
		}
		if r := f.do(t, "GET", path+"?limit=500", f.operator, nil); r.status != 200 {
			t.Errorf("GET %s?limit=500: %d %s, want 200", path, r.status, r.raw)
		}
	}
	// Two events (created, appended) with limit 1: the events cursor is
	// refused by the review list.
	if err := f.store.AppendEvent(context.Background(), uuid.MustParse(id), "note", "test", nil); err != nil {
		t.Fatal(err)
	}
	r := f.do(t, "GET", "/v1/operations/"+id+"/events?limit=1", f.operator, nil)
	cursor := r.str("next_cursor")
	if cursor == "" {
		t.Fatalf("no next_cursor on a page of 1 of 2 events: %s", r.raw)
	}
	if r := f.do(t, "GET", "/v1/review?cursor="+url.QueryEscape(cursor), f.operator, nil); r.status != 400 || r.errorCode() != "invalid_cursor" {
		t.Errorf("review with an events cursor: %d %s, want 400 invalid_cursor", r.status, r.raw)
	}
}

// TestOperationEventsArePaged: an operation's history comes a page at a
// time, oldest first, each event once.
func TestOperationEventsArePaged(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.queuedOperation(t, "po-1")
	for i := range 6 {
		if err := f.store.AppendEvent(context.Background(), uuid.MustParse(id), ledger.EventKind(fmt.Sprintf("note_%d", i)), "test", nil); err != nil {
			t.Fatal(err)
		}
	}
	pages := f.pageAll(t, "/v1/operations/"+id+"/events", f.agent, "events", 3)
	var kinds []string
	last := -1.0
	for _, page := range pages {
		for _, e := range page {
			kinds = append(kinds, e["kind"].(string))
			if seq := e["seq"].(float64); seq <= last {
				t.Errorf("seq %v after %v", seq, last)
			} else {
				last = seq
			}
		}
	}
	if len(pages) != 3 || len(kinds) != 7 || kinds[0] != "created" || kinds[6] != "note_5" {
		t.Errorf("%d pages, events %v; want 3 pages of created then note_0..note_5", len(pages), kinds)
	}
}

// TestInFlightListIsPaged: GET /v1/dispatch pages the operations in
// flight, oldest claim first, each once.
func TestInFlightListIsPaged(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tenant := f.tenantID(t)
	want := map[string]bool{}
	for i := range 5 {
		id := uuid.MustParse(f.queuedOperation(t, fmt.Sprintf("po-%d", i)))
		if _, err := f.store.Transition(context.Background(), ledger.Change{
			ID: id, From: ledger.StatusQueued, Version: 1, To: ledger.StatusDispatching, Kind: "claimed", Actor: "test",
			LeaseOwner: "w", LeaseUntil: time.Now().Add(time.Minute),
		}); err != nil {
			t.Fatal(err)
		}
		want[id.String()] = true
	}
	_ = tenant
	pages := f.pageAll(t, "/v1/dispatch", f.operator, "in_flight", 2)
	seen := map[string]int{}
	for _, page := range pages {
		for _, op := range page {
			seen[op["operation_id"].(string)]++
		}
	}
	if len(pages) != 3 || len(seen) != 5 {
		t.Errorf("%d pages, %d operations; want 3 and 5", len(pages), len(seen))
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("%s listed %d times", id, seen[id])
		}
	}
}
