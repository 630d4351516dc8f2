package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/ledger"
)

// TestResumeReleasesInBatchesEachInItsOwnTransaction: a resume hands the
// paused work back in batches of ResumeBatch, each committed on its own
// (the outbox rows of each batch carry their own transaction id), and
// releases every operation exactly once. It used to release everything in
// one unbounded transaction.
func TestResumeReleasesInBatchesEachInItsOwnTransaction(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	store := ledger.New(f.pool, ledger.Config{ResumeBatch: 2, Subjects: broker.Subjects{Prefix: "TEST"}})
	if err := store.PauseDispatch(ctx, ledger.WholeTenant(f.tenant), "", "", "test"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		params := fmt.Sprintf(`{"n":%d}`, i)
		if _, _, err := f.enqueue(fmt.Sprintf("k%d", i), params, f.approve(t, params, 1).ID); err != nil {
			t.Fatal(err)
		}
	}
	// Their first messages were published (and dropped as paused): they
	// wait for a new one.
	if _, err := f.pool.Exec(ctx, `UPDATE outbox SET published_at = now()`); err != nil {
		t.Fatal(err)
	}
	removed, released, err := store.ResumeDispatch(ctx, ledger.WholeTenant(f.tenant), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if removed != 1 || released != 5 {
		t.Errorf("removed %d pauses and released %d operations, want 1 and 5", removed, released)
	}
	messages := f.count(t, `SELECT count(*) FROM outbox WHERE published_at IS NULL`)
	distinctOps := f.count(t, `SELECT count(DISTINCT split_part(msg_id, '.', 2)) FROM outbox WHERE published_at IS NULL`)
	transactions := f.count(t, `SELECT count(DISTINCT xmin::text) FROM outbox WHERE published_at IS NULL`)
	if messages != 5 || distinctOps != 5 || transactions != 3 {
		t.Errorf("released %d messages for %d operations in %d transactions; want 5, 5, 3 (batches of 2)", messages, distinctOps, transactions)
	}
}

// TestLapsesAgreeWithCheckLapse: a review page asks for many operations'
// standing in one query (Lapses); it must answer what the dispatcher's
// CheckLapse answers for each, in every case.
func TestLapsesAgreeWithCheckLapse(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	cases := map[string]func(op ledger.Operation){
		"standing": func(ledger.Operation) {},
		"approval revoked": func(op ledger.Operation) {
			if _, err := f.pool.Exec(ctx, `UPDATE approvals SET revoked_at = now() WHERE id = $1`, op.ApprovalID); err != nil {
				t.Fatal(err)
			}
		},
		"approval expired": func(op ledger.Operation) {
			if _, err := f.pool.Exec(ctx, `UPDATE approvals SET expires_at = now() - interval '1 second' WHERE id = $1`, op.ApprovalID); err != nil {
				t.Fatal(err)
			}
		},
	}
	var ids []uuid.UUID
	for name, lapse := range cases {
		params := fmt.Sprintf(`{"case":%q}`, name)
		op, _, err := f.enqueue(name, params, f.approve(t, params, 1).ID)
		if err != nil {
			t.Fatal(err)
		}
		lapse(op)
		ids = append(ids, op.ID)
	}
	check := func(when string) {
		t.Helper()
		got, err := f.store.Lapses(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[ledger.Lapse]bool{}
		for _, id := range ids {
			want, err := f.store.CheckLapse(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got[id] != want {
				t.Errorf("%s: Lapses says %q, CheckLapse %q", when, got[id], want)
			}
			seen[want] = true
		}
		if len(seen) < 3 {
			t.Errorf("%s: only lapses %v were exercised", when, seen)
		}
	}
	check("before the token is revoked")
	if _, err := f.pool.Exec(ctx, `UPDATE api_tokens SET revoked_at = now() WHERE id = $1`, f.agent.TokenID); err != nil {
		t.Fatal(err)
	}
	check("after the token is revoked")
}

// TestOperationsPageReadsTheTenantIndexInOrder: a page of a tenant's
// operations is read from operations_tenant_created_idx in its order
// (backward, newest first) and stops at the limit; without the index every
// page sorted the tenant's whole history. So is a page of one access
// scope's: the scope is a filter on that index's rows, never a reason to
// sort the history (what is sorted is the page's own rows, at most the
// limit).
func TestOperationsPageReadsTheTenantIndexInOrder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	conn, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// Few rows make a sequential scan cheapest; the plan that matters is
	// the one a large table gets.
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	for _, scope := range []string{"", "supply-eu"} {
		in := ledger.Access{Tenant: f.tenant, Scope: scope}
		rows, _ := conn.Query(ctx, "EXPLAIN "+ledger.OperationsPageSQL, ledger.OperationsPageArgs(in, ledger.OperationsFilter{}, nil, 50))
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		if !strings.Contains(plan, "Index Scan Backward using operations_tenant_created_idx") {
			t.Errorf("a page of operations (scope %q) does not read the tenant index in order:\n%s", scope, plan)
		}
	}
}

// TestOperationsPageFilteredBeyondItsWindowGoesOnFromWhereItRead: a filter
// no index holds (here a client key) reads at most Window operations a
// page; a page whose window fills before it finds a match is empty but not
// the last: it says how far back it read, and the next page goes on from
// there and finds the match, once.
func TestOperationsPageFilteredBeyondItsWindowGoesOnFromWhereItRead(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	// The oldest of five has the client key.
	var ops []ledger.Operation
	for i := range 5 {
		opts := testfactory.OperationOpts{Tenant: f.acme, Key: fmt.Sprintf("k%d", i), Params: fmt.Sprintf(`{"n":%d}`, i)}
		if i == 0 {
			opts.ClientKey = "call-7"
		}
		ops = append(ops, testfactory.Operation(t, f.store, opts))
	}
	oldest := ops[0]
	in := ledger.WholeTenant(f.tenant)
	filter := ledger.OperationsFilter{ClientKey: "call-7", Window: 3}

	first, err := f.store.OperationsPage(ctx, in, filter, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Operations) != 0 || first.Next == nil || first.ScannedTo == nil || !first.ScannedTo.Equal(ops[2].CreatedAt) {
		t.Fatalf("the first window: %d operations, next %v, read to %v; want none, a next page, read to the third newest (%v)",
			len(first.Operations), first.Next, first.ScannedTo, ops[2].CreatedAt)
	}
	second, err := f.store.OperationsPage(ctx, in, filter, first.Next, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Operations) != 1 || second.Operations[0].ID != oldest.ID || second.Next != nil || second.ScannedTo != nil {
		t.Fatalf("the second window: %v, next %v; want the one operation of call-7 and the end", second.Operations, second.Next)
	}

	// Without such a filter a page is its own window: five operations in
	// pages of two, each full until the last.
	var seen []uuid.UUID
	var after *ledger.OperationsCursor
	for range 4 {
		page, err := f.store.OperationsPage(ctx, in, ledger.OperationsFilter{}, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range page.Operations {
			seen = append(seen, op.ID)
		}
		if page.ScannedTo != nil {
			t.Errorf("an unfiltered page says it read a window")
		}
		if after = page.Next; after == nil {
			break
		}
	}
	if len(seen) != 5 || seen[0] != ops[4].ID || seen[4] != oldest.ID {
		t.Errorf("pages of two list %v, want the five newest first", seen)
	}
}
