package retention_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/retention"
)

// askAgain submits params under key over HTTP with a new approval, as an
// agent does, and returns the answer.
func askAgain(t *testing.T, p *testpipeline.Pipeline, key, params string) (int, map[string]any) {
	t.Helper()
	a := p.Approve(params, time.Hour)
	return p.Do("POST", "/v1/operations", p.Agent,
		fmt.Sprintf(`{"action":%q,"key":%q,"params":%s,"approval_id":%q}`, testpipeline.Action, key, params, a.ID))
}

// settle bounds each wait for the pipeline, with room for a loaded machine.
const settle = 30 * time.Second

// tombstones counts the key tombstones of operations.
func tombstones(t *testing.T, p *testpipeline.Pipeline) int {
	t.Helper()
	var n int
	if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM key_tombstones`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAKeyAskedAgainAfterItsOperationWasPrunedIsTheSameOperationOrAConflict:
// retention pruned a settled operation and left its key tombstone. The
// same key asked again with the same params is a new operation with the
// pruned one's external key, so the supplier (which honours keys) answers
// its first effect: one order, counted at the supplier. With other params
// it is the 409 of a live key's conflict, and nothing is stored or sent.
// An operation made before derived keys (its key 'al_' || id) hands that
// key on the same way. Never a replay of the pruned operation's result.
func TestAKeyAskedAgainAfterItsOperationWasPrunedIsTheSameOperationOrAConflict(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, Mode: mocksupplier.Honour})
	p.Start(1)
	const params, other = `{"sku":"A-1","qty":1}`, `{"sku":"A-1","qty":9}`
	cases := []struct {
		name, key       string
		previousRelease bool
		again           string
		first           ledger.Operation
	}{
		{name: "the same params", key: "po-same", again: params},
		{name: "other params", key: "po-other", again: other},
		{name: "made before derived keys, the same params", key: "po-old-same", previousRelease: true, again: params},
		{name: "made before derived keys, other params", key: "po-old-other", previousRelease: true, again: other},
	}
	for i, tc := range cases {
		if tc.previousRelease {
			cases[i].first = testfactory.OperationOfPreviousRelease(t, p.Store, p.Pool, p.Broker.DispatchSubject("acme"),
				testfactory.OperationOpts{Tenant: p.FactoryTenant,
					Key: tc.key, Params: params})
		} else {
			cases[i].first = p.Enqueue(tc.key, params)
		}
	}
	for i, tc := range cases {
		cases[i].first = p.WaitStatus(tc.first, ledger.StatusSucceeded, settle)
		backdate(t, p, tc.first.ID)
	}
	p.Settled(settle)
	if sum, err := pruner(t, p, t.TempDir(), 0).Run(context.Background(), false); err != nil || sum.Operations != int64(len(cases)) {
		t.Fatalf("prune: %+v %v, want the %d operations pruned", sum, err, len(cases))
	}
	if n := tombstones(t, p); n != len(cases) {
		t.Fatalf("%d key tombstones after the prune, want %d", n, len(cases))
	}

	for _, tc := range cases {
		status, out := askAgain(t, p, tc.key, tc.again)
		if tc.again != params {
			refusal, _ := out["error"].(map[string]any)
			if status != http.StatusConflict || refusal["code"] != "key_reused_with_different_params" {
				t.Errorf("%s: %d %v, want 409 key_reused_with_different_params", tc.name, status, out)
			}
			continue
		}
		if status != http.StatusCreated {
			t.Errorf("%s: %d %v, want 201", tc.name, status, out)
			continue
		}
		again := p.WaitStatus(p.Operation(out), ledger.StatusSucceeded, settle)
		if again.ID == tc.first.ID || again.ExternalKey != tc.first.ExternalKey || out["external_key"] != tc.first.ExternalKey {
			t.Errorf("%s: operation %s with external key %q (answered %v), want a new id with the pruned %q",
				tc.name, again.ID, again.ExternalKey, out["external_key"], tc.first.ExternalKey)
		}
	}
	p.Settled(settle)
	for _, tc := range cases {
		if n := p.Orders(tc.first); n != 1 {
			t.Errorf("%s: %d orders at the supplier under %s, want 1", tc.name, n, tc.first.ExternalKey)
		}
	}
	if n := p.Supplier.TotalOrders(); n != len(cases) {
		t.Errorf("%d orders at the supplier, want %d: one per intention", n, len(cases))
	}
	// A proposal under a pruned key with other params is refused alike.
	if status, out := p.Propose("po-old-other", `{"sku":"B-2","qty":4}`); status != http.StatusConflict {
		t.Errorf("a proposal under a pruned key with other params: %d %v, want 409", status, out)
	}
	var conflicts int
	if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM operations WHERE key IN ('po-other', 'po-old-other')`).Scan(&conflicts); err != nil || conflicts != 0 {
		t.Errorf("%d operations under the conflicting keys (%v), want none", conflicts, err)
	}
}

// TestKeyTombstonesOutliveTheirPruneByKeyTombstones: a key tombstone stays
// while it is younger than Config.KeyTombstones (the longest
// idempotency.retention of the providers file, at least the retention
// period) and goes in the first prune after; a dry run counts it and
// leaves it.
func TestKeyTombstonesOutliveTheirPruneByKeyTombstones(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	p.Start(1)
	ids := settledOld(t, p, "po-tomb", 3)
	p.Settled(settle)
	if sum, err := pruner(t, p, t.TempDir(), 0).Run(context.Background(), false); err != nil || sum.Operations != int64(len(ids)) {
		t.Fatalf("prune: %+v %v", sum, err)
	}
	const kept = 120 * 24 * time.Hour
	for _, tc := range []struct {
		name   string
		after  time.Duration
		dryRun bool
		gone   int64
		left   int
	}{
		{"younger than KeyTombstones", kept - time.Hour, false, 0, 3},
		{"older, a dry run", kept + time.Hour, true, 3, 3},
		{"older", kept + time.Hour, false, 3, 0},
	} {
		at := time.Now().Add(tc.after)
		pr, err := retention.New(retention.Config{Store: p.Store, Pool: p.Pool, OlderThan: retentionPeriod, KeyTombstones: kept,
			Archive: t.TempDir(), Batch: 2, Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := pr.Run(context.Background(), tc.dryRun)
		if err != nil || sum.KeyTombstones != tc.gone {
			t.Errorf("%s: %d key tombstones went (%v), want %d", tc.name, sum.KeyTombstones, err, tc.gone)
		}
		if n := tombstones(t, p); n != tc.left {
			t.Errorf("%s: %d key tombstones left, want %d", tc.name, n, tc.left)
		}
	}
}
