package mocksupplier_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
)

// statementPage fetches one statement page with query and fails the test on anything but 200.
func (f fixture) statementPage(t *testing.T, query url.Values) mocksupplier.StatementPage {
	t.Helper()
	r := f.must(t, http.MethodGet, "/v1/statement?"+query.Encode(), "", "")
	if r.Status != http.StatusOK {
		t.Fatalf("statement %s: status %d, body %s", query.Encode(), r.Status, r.Body)
	}
	var p mocksupplier.StatementPage
	r.Decode(t, &p)
	return p
}

// statement follows next from the first page to the last and returns every order's id, in the
// order served, and the number of pages.
func (f fixture) statement(t *testing.T, query url.Values) (ids []string, pages int) {
	t.Helper()
	q := maps(query)
	for {
		p := f.statementPage(t, q)
		pages++
		for _, o := range p.Orders {
			ids = append(ids, o.ID)
		}
		if p.Next == nil {
			return ids, pages
		}
		q.Set("after", *p.Next)
	}
}

func maps(v url.Values) url.Values {
	c := url.Values{}
	for k, vs := range v {
		c[k] = slices.Clone(vs)
	}
	return c
}

// createAt creates an order through POST /v1/orders at the clock's time, then moves it on by a
// second.
func createAt(t *testing.T, f fixture, clk interface{ Advance(time.Duration) }, reference string) mocksupplier.Order {
	t.Helper()
	r := f.create(t, "", `{"client_reference":"`+reference+`","amount":100}`)
	if r.Status != http.StatusCreated {
		t.Fatalf("create %s: status %d, body %s", reference, r.Status, r.Body)
	}
	clk.Advance(time.Second)
	return r.order(t)
}

func TestStatementListsTheOrdersCreatedInTheWindowOldestFirstAcrossPages(t *testing.T) {
	t.Parallel()
	clk := newClock()
	f := setup(t, mocksupplier.Config{Now: clk.Now, LookupLag: time.Hour})
	start := clk.Now()
	var made []mocksupplier.Order
	for i := range 7 {
		made = append(made, createAt(t, f, clk, "po-"+strconv.Itoa(i)))
	}
	// The window [start+1s, start+6s) holds orders 1..5; the lookup lag does not hide them.
	want := []string{made[1].ID, made[2].ID, made[3].ID, made[4].ID, made[5].ID}
	tests := []struct {
		name  string
		query url.Values
		pages int
	}{
		{"RFC 3339 bounds, two per page", url.Values{
			"created_gte": {start.Add(time.Second).Format(time.RFC3339)},
			"created_lt":  {start.Add(6 * time.Second).Format(time.RFC3339)},
			"limit":       {"2"},
		}, 3},
		{"unix bounds, default limit", url.Values{
			"created_gte": {strconv.FormatInt(start.Add(time.Second).Unix(), 10)},
			"created_lt":  {strconv.FormatInt(start.Add(6*time.Second).Unix(), 10)},
		}, 1},
		{"limit equal to the window", url.Values{
			"created_gte": {strconv.FormatInt(start.Add(time.Second).Unix(), 10)},
			"created_lt":  {strconv.FormatInt(start.Add(6*time.Second).Unix(), 10)},
			"limit":       {"5"},
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, pages := f.statement(t, tt.query)
			if !slices.Equal(got, want) {
				t.Errorf("ids = %v, want %v", got, want)
			}
			if pages != tt.pages {
				t.Errorf("pages = %d, want %d", pages, tt.pages)
			}
		})
	}
	t.Run("no bounds lists every order", func(t *testing.T) {
		t.Parallel()
		got, _ := f.statement(t, url.Values{"limit": {"3"}})
		if len(got) != len(made) {
			t.Errorf("listed %d orders, want %d", len(got), len(made))
		}
	})
	t.Run("records carry what the create stored", func(t *testing.T) {
		t.Parallel()
		p := f.statementPage(t, url.Values{"limit": {"1"}})
		o := p.Orders[0]
		if o.ID != made[0].ID || o.ClientReference != "po-0" || !o.CreatedAt.Equal(made[0].CreatedAt) || string(o.Params) != string(made[0].Params) {
			t.Errorf("first record = %+v, want the created %+v", o, made[0])
		}
	})
}

func TestStatementRefusesABadQuery(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	for _, q := range []string{"limit=0", "limit=101", "limit=ten", "created_gte=yesterday", "created_lt=2030-01-02", "after=nocursor", "after=12.", "after=x.ord_1"} {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			r := f.must(t, http.MethodGet, "/v1/statement?"+q, "", "")
			if r.Status != http.StatusBadRequest || r.errorCode(t) != "bad_query" {
				t.Errorf("status %d, body %s; want 400 bad_query", r.Status, r.Body)
			}
		})
	}
}

func TestStatementShowsWhatTheSeedingHelpersPlaced(t *testing.T) {
	t.Parallel()
	clk := newClock()
	f := setup(t, mocksupplier.Config{Now: clk.Now})
	start := clk.Now()
	kept := createAt(t, f, clk, "po-kept")
	moved := createAt(t, f, clk, "po-moved")
	removed := createAt(t, f, clk, "po-removed")
	changed := createAt(t, f, clk, "po-changed")
	foreign := f.sup.SeedOrder(mocksupplier.Seed{Params: json.RawMessage(`{"amount":5}`)})
	// The duplicate is made a second later: orders of one instant are
	// listed in the order of their random ids.
	clk.Advance(time.Second)
	chosen := f.sup.SeedOrder(mocksupplier.Seed{ClientReference: "po-elsewhere", CreatedAt: start.Add(-time.Hour)})
	dup, err := f.sup.DuplicateOrder("po-kept")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.sup.SetOrderParams(changed.ID, json.RawMessage(`{"amount":90,"client_reference":"po-changed"}`)); err != nil {
		t.Fatal(err)
	}
	if err := f.sup.SetOrderCreatedAt(moved.ID, start.Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := f.sup.RemoveOrder(removed.ID); err != nil {
		t.Fatal(err)
	}

	window := url.Values{"created_gte": {start.Format(time.RFC3339)}, "created_lt": {clk.Now().Add(time.Minute).Format(time.RFC3339)}}
	got, _ := f.statement(t, window)
	if want := []string{kept.ID, changed.ID, foreign.ID, dup.ID}; !slices.Equal(got, want) {
		t.Errorf("window ids = %v, want kept, changed, foreign, duplicate %v", got, want)
	}
	before, _ := f.statement(t, url.Values{"created_lt": {strconv.FormatInt(start.Unix(), 10)}})
	if want := []string{moved.ID, chosen.ID}; !slices.Equal(before, want) {
		t.Errorf("ids before the window = %v, want the moved and the backdated seed %v", before, want)
	}
	p := f.statementPage(t, window)
	if got, want := string(p.Orders[1].Params), `{"amount":90,"client_reference":"po-changed"}`; got != want {
		t.Errorf("changed params = %s, want %s", got, want)
	}
	if got, want := p.Orders[2].ClientReference, ""; got != want {
		t.Errorf("foreign reference = %q, want none", got)
	}
	if got, want := string(p.Orders[3].Params), string(kept.Params); got != want {
		t.Errorf("duplicate params = %s, want the first order's %s", got, want)
	}
	if got, want := f.sup.Orders("po-kept"), 2; got != want {
		t.Errorf("Orders(po-kept) = %d, want %d", got, want)
	}
	if got := f.sup.Orders("po-removed"); got != 0 {
		t.Errorf("Orders(po-removed) = %d, want 0", got)
	}
	for name, err := range map[string]error{
		"duplicate": func() error { _, err := f.sup.DuplicateOrder("po-none"); return err }(),
		"remove":    f.sup.RemoveOrder(removed.ID),
		"move":      f.sup.SetOrderCreatedAt("ord_none", start),
	} {
		if !errorsIs(err, mocksupplier.ErrNoOrder) {
			t.Errorf("%s of a missing order: %v, want ErrNoOrder", name, err)
		}
	}
}

func TestStatementFaultStrikesTheNamedPageOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind       mocksupplier.StatementFaultKind
		status     int
		retryAfter string
	}{
		{mocksupplier.PageNotJSON, http.StatusOK, ""},
		{mocksupplier.PageUnauthorized401, http.StatusUnauthorized, ""},
		{mocksupplier.PageRateLimit429, http.StatusTooManyRequests, "3"},
		{mocksupplier.PageError500, http.StatusInternalServerError, ""},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			f := setup(t, mocksupplier.Config{Now: clk.Now})
			for i := range 3 {
				createAt(t, f, clk, "po-"+strconv.Itoa(i))
			}
			f.sup.SetStatementFaults(mocksupplier.StatementFault{Kind: tt.kind, Page: 2, RetryAfterS: 3})

			first := f.statementPage(t, url.Values{"limit": {"1"}})
			q := url.Values{"limit": {"1"}, "after": {*first.Next}}
			r := f.must(t, http.MethodGet, "/v1/statement?"+q.Encode(), "", "")
			if r.Status != tt.status {
				t.Fatalf("page 2: status %d, want %d; body %s", r.Status, tt.status, r.Body)
			}
			if json.Valid(r.Body) == (tt.kind == mocksupplier.PageNotJSON) {
				t.Errorf("page 2 body %q: JSON = %v", r.Body, json.Valid(r.Body))
			}
			if got := r.Header.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.retryAfter)
			}
			// Asked again, page 2 is the third request of the run: the fault is spent.
			again := f.statementPage(t, q)
			if len(again.Orders) != 1 {
				t.Errorf("page 2 again: %d orders, want 1", len(again.Orders))
			}
		})
	}
}

func TestStatementFaultWaitsForItsPageFromTheFirstPageOfARun(t *testing.T) {
	t.Parallel()
	clk := newClock()
	f := setup(t, mocksupplier.Config{Now: clk.Now})
	for i := range 4 {
		createAt(t, f, clk, "po-"+strconv.Itoa(i))
	}
	f.sup.SetStatementFaults(mocksupplier.StatementFault{Kind: mocksupplier.PageError500, Page: 3})
	// A run that reads two pages only, then a new run: its page 3 is the one that fails.
	p := f.statementPage(t, url.Values{"limit": {"1"}})
	f.statementPage(t, url.Values{"limit": {"1"}, "after": {*p.Next}})
	p = f.statementPage(t, url.Values{"limit": {"1"}})
	p = f.statementPage(t, url.Values{"limit": {"1"}, "after": {*p.Next}})
	q := url.Values{"limit": {"1"}, "after": {*p.Next}}
	if r := f.must(t, http.MethodGet, "/v1/statement?"+q.Encode(), "", ""); r.Status != http.StatusInternalServerError {
		t.Errorf("page 3 of the second run: status %d, want 500", r.Status)
	}
}

func TestStatementLoopAnswersTheCursorItWasGivenEveryTime(t *testing.T) {
	t.Parallel()
	clk := newClock()
	f := setup(t, mocksupplier.Config{Now: clk.Now})
	for i := range 4 {
		createAt(t, f, clk, "po-"+strconv.Itoa(i))
	}
	f.sup.SetStatementFaults(mocksupplier.StatementFault{Kind: mocksupplier.PageLoop, Page: 2})
	first := f.statementPage(t, url.Values{"limit": {"1"}})
	given := *first.Next
	for range 3 {
		p := f.statementPage(t, url.Values{"limit": {"1"}, "after": {given}})
		if p.Next == nil || *p.Next != given {
			t.Fatalf("next = %v, want the cursor given %q", p.Next, given)
		}
	}
	f.sup.SetStatementFaults()
	if p := f.statementPage(t, url.Values{"limit": {"1"}, "after": {given}}); p.Next == nil || *p.Next == given {
		t.Errorf("after clearing the faults next = %v, want the next page's cursor", p.Next)
	}
}

func TestStatementSlowPageAnswersNoEarlierThanItsDelay(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	f.sup.SeedOrder(mocksupplier.Seed{ClientReference: "po-1"})
	const delay = 50 * time.Millisecond
	f.sup.SetStatementFaults(mocksupplier.StatementFault{Kind: mocksupplier.PageSlow, Page: 1, MS: int(delay.Milliseconds())})
	began := time.Now()
	p := f.statementPage(t, url.Values{})
	if took := time.Since(began); took < delay {
		t.Errorf("answered after %v, want at least %v", took, delay)
	}
	if len(p.Orders) != 1 {
		t.Errorf("slow page holds %d orders, want 1", len(p.Orders))
	}
}

func TestSetStatementFaultsPanicsOnAnInvalidFault(t *testing.T) {
	t.Parallel()
	for _, bad := range []mocksupplier.StatementFault{{Kind: "nope"}, {Kind: mocksupplier.PageLoop, Page: 1}, {Kind: mocksupplier.PageSlow, MS: -1}} {
		t.Run(fmt.Sprint(bad), func(t *testing.T) {
			t.Parallel()
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			mocksupplier.New(mocksupplier.Config{}).SetStatementFaults(bad)
		})
	}
}

func TestGeneratedStatementServesTheWholeLargeWindowAHundredPerPage(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const count = 100_000
	f.sup.SetGenerated(&mocksupplier.Generated{Count: count, Start: start, Every: 100 * time.Millisecond, ReferencePrefix: "op-", Params: json.RawMessage(`{"amount":1}`)})
	q := url.Values{"limit": {"100"}, "created_gte": {strconv.FormatInt(start.Unix(), 10)}, "created_lt": {strconv.FormatInt(start.Add(count*100*time.Millisecond).Unix(), 10)}}
	seen, pages := 0, 0
	for {
		p := f.statementPage(t, q)
		pages++
		for i, o := range p.Orders {
			if want := mocksupplier.GeneratedID(seen + i); o.ID != want {
				t.Fatalf("page %d record %d: id %s, want %s", pages, i, o.ID, want)
			}
		}
		seen += len(p.Orders)
		if p.Next == nil {
			break
		}
		q.Set("after", *p.Next)
	}
	if seen != count || pages != count/100 {
		t.Errorf("read %d records in %d pages, want %d in %d", seen, pages, count, count/100)
	}
	t.Run("a window inside it", func(t *testing.T) {
		t.Parallel()
		// [10.05 s, 20 s) holds records 101..199 (record i is created at i*100 ms).
		inner := url.Values{"created_gte": {start.Add(10050 * time.Millisecond).Format(time.RFC3339Nano)}, "created_lt": {start.Add(20 * time.Second).Format(time.RFC3339)}}
		ids, _ := f.statement(t, inner)
		if len(ids) != 99 || ids[0] != mocksupplier.GeneratedID(101) || ids[98] != mocksupplier.GeneratedID(199) {
			t.Errorf("inner window: %d ids from %v, want 99 from %s to %s", len(ids), ids[:min(len(ids), 1)], mocksupplier.GeneratedID(101), mocksupplier.GeneratedID(199))
		}
	})
}

// Adjust changes what a generated order says, order by order, and the cursor still walks the
// window: a reference another order holds, no reference, other params.
func TestGeneratedStatementAdjustChangesOrdersAndPagingStillWalksTheWindow(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f.sup.SetGenerated(&mocksupplier.Generated{Count: 250, Start: start, Every: time.Second, ReferencePrefix: "op-",
		Params: json.RawMessage(`{"qty":1}`), Adjust: func(i int, o *mocksupplier.Order) {
			switch i % 100 {
			case 3:
				o.ClientReference = "op-" + strconv.Itoa(i-1)
			case 4:
				o.ClientReference = ""
			case 5:
				o.Params = json.RawMessage(`{"qty":2}`)
			}
		}})
	q := url.Values{"limit": {"100"}}
	refs := map[string]int{}
	var seen, unreferenced, other int
	for {
		p := f.statementPage(t, q)
		for _, o := range p.Orders {
			if o.ID != mocksupplier.GeneratedID(seen) {
				t.Fatalf("record %d: id %s", seen, o.ID)
			}
			seen++
			refs[o.ClientReference]++
			if o.ClientReference == "" {
				unreferenced++
			}
			if string(o.Params) != `{"qty":1}` {
				other++
			}
		}
		if p.Next == nil {
			break
		}
		q.Set("after", *p.Next)
	}
	if seen != 250 || unreferenced != 3 || other != 3 || refs["op-2"] != 2 || refs["op-102"] != 2 || refs["op-3"] != 0 {
		t.Errorf("read %d records, %d without reference, %d with other params, op-2 twice: %d, op-3: %d; want 250, 3, 3, 2, 0",
			seen, unreferenced, other, refs["op-2"], refs["op-3"])
	}
}

// TestGeneratedStatementPageCostDoesNotGrowWithTheWindow holds the large-window mode to its
// promise: a page deep in a window of ten million records allocates what a page of a window of a
// thousand does.
// It is not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestGeneratedStatementPageCostDoesNotGrowWithTheWindow(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	allocs := func(count int) float64 {
		sup := mocksupplier.New(mocksupplier.Config{})
		sup.SetGenerated(&mocksupplier.Generated{Count: count, Start: start, Every: time.Second, ReferencePrefix: "op-"})
		first := httptest.NewRecorder()
		sup.ServeHTTP(first, httptest.NewRequest(http.MethodGet, "/v1/statement?limit=100&created_gte="+strconv.FormatInt(start.Add(time.Duration(count/2)*time.Second).Unix(), 10), nil))
		var p mocksupplier.StatementPage
		if err := json.Unmarshal(first.Body.Bytes(), &p); err != nil || p.Next == nil {
			t.Fatalf("first page: %v, next %v", err, p.Next)
		}
		target := "/v1/statement?limit=100&after=" + url.QueryEscape(*p.Next)
		return testing.AllocsPerRun(20, func() {
			sup.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, target, nil))
		})
	}
	small, large := allocs(1_000), allocs(10_000_000)
	t.Logf("allocations per page of 100: %.0f at a thousand records, %.0f at ten million", small, large)
	if large > small*1.1+5 {
		t.Errorf("allocations per page: %.0f at ten million records, %.0f at a thousand; want the same", large, small)
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
