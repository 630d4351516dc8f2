package main

import (
	"context"
	"testing"

	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testnats"
	"github.com/actledger/actledger/ledger"
)

// TestLargeLedgerIsTheMixItClaimsAndKeepsItsSize fills a small large
// ledger (40,000 operations) as the large stage does and checks its mix
// from the rows: 97 % terminal, every open state present, about four
// events per operation, four tenants of 55/25/15/5 %; that a second
// open reuses it instead of filling again; and that an API stage run on
// it and cleaned leaves exactly the fill behind (no operation, event,
// outbox row or count delta of the run), so runs do not pile up rows.
func TestLargeLedgerIsTheMixItClaimsAndKeepsItsSize(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := &env{adminURL: testdb.AdminURL(), natsURL: testnats.URL()}
	pl := tinyPlan
	pl.LargeOperations, pl.LargeRange, pl.LargeWorkers = 40_000, 15_000, 2
	pl.LargeDatabase = uniqueName(databasePrefix + "large_test_")
	t.Cleanup(func() {
		(&database{name: pl.LargeDatabase, admin: e.adminURL}).drop(context.Background())
	})
	db, info, err := openLarge(ctx, e, pl, false)
	if err != nil {
		t.Fatal(err)
	}
	if info.Reused {
		t.Fatalf("a new database was reported as reused")
	}

	var ops, terminal, openStates, events int64
	var tenants []int64
	if err := db.pool.QueryRow(ctx, `SELECT o.n, o.terminal, o.open_states, o.events, t.tenants FROM
  (SELECT count(*) AS n, count(*) FILTER (WHERE status IN ('succeeded', 'failed', 'cancelled')) AS terminal,
          count(DISTINCT status) FILTER (WHERE status NOT IN ('succeeded', 'failed', 'cancelled')) AS open_states,
          (SELECT count(*) FROM operation_events) AS events FROM operations) o,
  (SELECT array_agg(n ORDER BY n DESC) AS tenants FROM (SELECT count(*) AS n FROM operations GROUP BY tenant_id) x) t`).
		Scan(&ops, &terminal, &openStates, &events, &tenants); err != nil {
		t.Fatal(err)
	}
	if ops != pl.LargeOperations {
		t.Errorf("%d operations, want %d", ops, pl.LargeOperations)
	}
	if share := float64(terminal) / float64(ops); share < 0.965 || share > 0.975 {
		t.Errorf("%.3f of the operations are terminal, want about 0.97", share)
	}
	if want := int64(len(ledger.Statuses) - 3); openStates != want {
		t.Errorf("%d open states hold operations, want every one of the %d", openStates, want)
	}
	if perOp := float64(events) / float64(ops); perOp < 3.5 || perOp > 4.5 {
		t.Errorf("%.2f events per operation, want about 4", perOp)
	}
	wantShares := []float64{0.55, 0.25, 0.15, 0.05}
	if len(tenants) != len(wantShares) {
		t.Fatalf("%d tenants, want %d", len(tenants), len(wantShares))
	}
	for i, n := range tenants {
		if share := float64(n) / float64(ops); share < wantShares[i]-0.01 || share > wantShares[i]+0.01 {
			t.Errorf("tenant %d holds %.3f of the operations, want %.2f", i, share, wantShares[i])
		}
	}
	var counted int64
	for _, s := range info.States {
		counted += s.N
	}
	if counted != ops {
		t.Errorf("operation_counts says %d operations, the table holds %d", counted, ops)
	}
	db.pool.Close()

	db, info, err = openLarge(ctx, e, pl, false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.pool.Close()
	if !info.Reused {
		t.Errorf("the kept database was filled again instead of reused")
	}
	before := largeRowCounts(t, db)

	e.supplier, err = startSupplier()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.supplier.close)
	large := *e
	large.large = db
	api, err := apiEnqueue(ctx, &large, pl)
	if err != nil {
		t.Fatal(err)
	}
	if api[0].Ops == 0 {
		t.Fatalf("the API stage enqueued nothing on the large ledger")
	}
	if during := largeRowCounts(t, db); during == before {
		t.Fatalf("the API stage left no row to clean: %+v", during)
	}
	deleted, _, err := cleanLarge(ctx, db, info.FilledAt)
	if err != nil {
		t.Fatal(err)
	}
	if after := largeRowCounts(t, db); after != before {
		t.Errorf("after the clean-up the ledger holds %+v, before the stage %+v", after, before)
	}
	if deleted < int64(api[0].Ops) {
		t.Errorf("the clean-up deleted %d operations, the stage enqueued at least %d", deleted, api[0].Ops)
	}
}

// rowCounts are the rows of the tables a stage writes to.
type rowCounts struct {
	Operations, Events, Outbox, Deltas, Tenants, Tokens, Approvals int64
}

func largeRowCounts(t *testing.T, db *database) rowCounts {
	t.Helper()
	var c rowCounts
	err := db.pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM operations), (SELECT count(*) FROM operation_events),
    (SELECT count(*) FROM outbox), (SELECT count(*) FROM operation_count_deltas), (SELECT count(*) FROM tenants),
    (SELECT count(*) FROM api_tokens), (SELECT count(*) FROM approvals)`).
		Scan(&c.Operations, &c.Events, &c.Outbox, &c.Deltas, &c.Tenants, &c.Tokens, &c.Approvals)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
