package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/internal/testpoll"
	"github.com/actledger/actledger/ledger"
)

// gauge scrapes r and returns actledger_operations by state.
func gauge(t *testing.T, r *Registry) map[string]float64 {
	t.Helper()
	families, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range families {
		if mf.GetName() != "actledger_operations" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return got
}

// truth counts the ledger itself.
func truth(t *testing.T, pool *pgxpool.Pool) map[string]float64 {
	t.Helper()
	want := map[string]float64{}
	for _, s := range ledger.Statuses {
		want[string(s)] = 0
	}
	rows, err := pool.Query(context.Background(), `SELECT status, count(*) FROM operations GROUP BY status`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var n float64
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		want[s] = n
	}
	return want
}

// TestOperationsGaugeFollowsEveryTransition: the operations gauge, read
// from counts kept by trigger, equals a count of the ledger after
// enqueues, claims, settlements and holds, scraped between steps with the
// deltas folded (as the Folder does on its timer) and not.
func TestOperationsGaugeFollowsEveryTransition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	store := ledger.New(pool, ledger.Config{Subjects: broker.Subjects{Prefix: "TEST"}})
	tokens, err := auth.New(pool, store, auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	acme := testfactory.NewTenant(t, tokens, "acme")
	p, approver := acme.Agent, acme.Approver
	r := New(pool, slog.New(slog.DiscardHandler))
	folder, err := NewFolder(pool, FolderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	checks := 0
	check := func(step string) {
		t.Helper()
		if checks++; checks%2 == 0 {
			if err := folder.Fold(ctx); err != nil {
				t.Fatal(err)
			}
		}
		got, want := gauge(t, r), truth(t, pool)
		for s, n := range want {
			if got[s] != n {
				t.Errorf("after %s: gauge %s = %v, ledger has %v", step, s, got[s], n)
			}
		}
	}
	check("nothing")
	var ops []ledger.Operation
	for i := range 6 {
		params := fmt.Sprintf(`{"n":%d}`, i)
		a, err := store.CreateApproval(ctx, ledger.NewApproval{TenantID: p.TenantID, ApproverTokenID: approver.TokenID, Action: "a",
			Params: []byte(params), PolicyVersion: "p1", ExpiresAt: time.Now().Add(time.Hour),
			Target: &ledger.Target{Account: "acct_test", Environment: "test"}})
		if err != nil {
			t.Fatal(err)
		}
		op, _, err := store.Enqueue(ctx, ledger.EnqueueRequest{TenantID: p.TenantID, TokenID: p.TokenID, Action: "a",
			Key: fmt.Sprintf("k%d", i), Provider: "acme", Params: []byte(params), ApprovalID: a.ID})
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	check("enqueues")
	move := func(i int, to ledger.Status) {
		t.Helper()
		c := ledger.Change{ID: ops[i].ID, From: ops[i].Status, Version: ops[i].Version, To: to, Kind: "test", Actor: "test"}
		if to == ledger.StatusDispatching {
			c.LeaseOwner, c.LeaseUntil = "w", time.Now().Add(time.Minute)
		}
		if to == ledger.StatusSucceeded {
			c.ProviderReference = "ord"
		}
		op, err := store.Transition(ctx, c)
		if err != nil {
			t.Fatalf("move %d to %s: %v", i, to, err)
		}
		ops[i] = op
	}
	for i := range 4 {
		move(i, ledger.StatusDispatching)
	}
	move(0, ledger.StatusSucceeded)
	check("claims, one settled")
	move(1, ledger.StatusSucceeded)
	move(2, ledger.StatusUnknown)
	move(4, ledger.StatusHeld)
	// Two scrapes in a row: a fold with no deltas changes nothing.
	check("more transitions")
	check("again")
	check("and again")
	move(4, ledger.StatusCancelled)
	check("cancel")

	// Folders and scrapes of several processes run at once while
	// operations move: no delta is folded twice or lost.
	var wg sync.WaitGroup
	for range 4 {
		o := New(pool, slog.New(slog.DiscardHandler))
		f, err := NewFolder(pool, FolderConfig{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if err := f.Fold(ctx); err != nil {
					t.Error(err)
				}
				if _, err := o.reg.Gather(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	move(2, ledger.StatusDispatching)
	move(2, ledger.StatusSucceeded)
	move(3, ledger.StatusFailed)
	move(5, ledger.StatusHeld)
	wg.Wait()
	check("concurrent scrapes")
}

// TestOperationsGaugeReadsNoOperationRow: the gauge's query reads no row of
// the operations table (the plan touches operation_counts and the deltas
// only), so a scrape costs the same with a million settled operations as
// with ten. Before, it counted the whole table on every scrape.
func TestOperationsGaugeReadsNoOperationRow(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	var plan []map[string]any
	if err := pool.QueryRow(context.Background(), "EXPLAIN (FORMAT JSON) "+operationsByState).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(plan)
	var relations []string
	var walk func(node map[string]any)
	walk = func(node map[string]any) {
		if rel, ok := node["Relation Name"].(string); ok {
			relations = append(relations, rel)
		}
		for _, child := range asNodes(node["Plans"]) {
			walk(child)
		}
	}
	walk(plan[0]["Plan"].(map[string]any))
	for _, rel := range relations {
		if rel == "operations" {
			t.Fatalf("the operations gauge reads the operations table: %s", raw)
		}
	}
	if len(relations) == 0 {
		t.Fatalf("no relation in plan %s", raw)
	}
}

func asNodes(v any) []map[string]any {
	list, _ := v.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, x := range list {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// TestApprovalRequestGaugesAndDecisionsAreReported checks the open
// proposals, the age of the oldest and the decisions by outcome.
func TestApprovalRequestGaugesAndDecisionsAreReported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	clock := time.Now().Add(-time.Minute)
	store := ledger.New(pool, ledger.Config{Subjects: broker.Subjects{Prefix: "TEST"}, Now: func() time.Time { return clock }})
	tokens, err := auth.New(pool, store, auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := testfactory.NewTenant(t, tokens, "acme").Agent
	for i := range 2 {
		if _, _, err := store.Propose(ctx, ledger.ProposeRequest{TenantID: p.TenantID, TokenID: p.TokenID, Action: "a",
			Key: fmt.Sprint("k", i), Provider: "acme", Params: []byte(`{}`), RequestTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	r := New(pool, slog.New(slog.DiscardHandler))
	r.ApprovalDecision(ApprovedByPerson)
	r.ApprovalRequestsExpired(2)
	families, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetValue() + "}"
			}
			got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	if got["actledger_approval_requests_open"] != 2 {
		t.Errorf("open = %v, want 2", got["actledger_approval_requests_open"])
	}
	if age := got["actledger_approval_request_oldest_age_seconds"]; age < 50 || age > 600 {
		t.Errorf("oldest age = %v s, want about 60", age)
	}
	for name, want := range map[string]float64{
		"actledger_approval_decisions_total{approved_by_person}": 1,
		"actledger_approval_decisions_total{approved_by_policy}": 0,
		"actledger_approval_decisions_total{denied}":             0,
		"actledger_approval_decisions_total{expired}":            2,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
}

// TestAScrapeWritesNothingAndTheFolderFoldsOnItsTimer: gathering the
// metrics reads the counts without folding them (the deltas stay where
// they are, nothing is deleted or inserted); a started Folder folds them
// on its own, and the gauge stays right throughout.
func TestAScrapeWritesNothingAndTheFolderFoldsOnItsTimer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	store := ledger.New(pool, ledger.Config{Subjects: broker.Subjects{Prefix: "TEST"}})
	tokens, err := auth.New(pool, store, auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := testfactory.NewTenant(t, tokens, "acme").Agent
	for i := range 3 {
		if _, _, err := store.Propose(ctx, ledger.ProposeRequest{TenantID: p.TenantID, TokenID: p.TokenID, Action: "a",
			Key: fmt.Sprint("k", i), Provider: "acme", Params: []byte(`{}`), RequestTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	rows := func() (deltas, folded int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM operation_count_deltas), (SELECT count(*) FROM operation_counts)`).Scan(&deltas, &folded); err != nil {
			t.Fatal(err)
		}
		return deltas, folded
	}
	deltas, folded := rows()
	if deltas == 0 {
		t.Fatal("no deltas to fold")
	}
	r := New(pool, slog.New(slog.DiscardHandler))
	for range 3 {
		if got := gauge(t, r); got["awaiting_approval"] != 3 {
			t.Fatalf("gauge = %v, want 3 awaiting_approval", got)
		}
	}
	if d, f := rows(); d != deltas || f != folded {
		t.Errorf("after scrapes: %d deltas, %d folded rows; want %d and %d (a scrape writes nothing)", d, f, deltas, folded)
	}

	folder, err := NewFolder(pool, FolderConfig{Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := folder.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer folder.Stop()
	testpoll.Until(t, 10*time.Second, func() error {
		if d, _ := rows(); d != 0 {
			return fmt.Errorf("the folder left %d deltas", d)
		}
		return nil
	})
	if got := gauge(t, r); got["awaiting_approval"] != 3 {
		t.Errorf("gauge after the fold = %v, want 3 awaiting_approval", got)
	}
}
