package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/ledger"
)

// TestALedgerBehindPauseMustProveItselfOnTheLedgerItWritesTo: the proof a
// message carries (an operation the ledger does not hold, a version it
// never reached) is judged again in the statement that pauses, so a read
// that reached a lagging replica cannot pause a healthy ledger: the
// operation exists, or holds that version, and nothing is paused; a true
// loss pauses.
func TestALedgerBehindPauseMustProveItselfOnTheLedgerItWritesTo(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	op := testfactory.Operation(t, f.store, testfactory.OperationOpts{Tenant: f.acme})
	for _, b := range []ledger.Behind{
		{Kind: "dispatch", OperationID: op.ID, Version: op.Version},                                  // "not held", but it is
		{Kind: "dispatch", OperationID: op.ID, Version: op.Version, Known: true, At: op.Version - 1}, // "never reached", but it has
	} {
		if _, err := f.store.LedgerBehind(ctx, b); !errors.Is(err, ledger.ErrBehindNotProven) {
			t.Errorf("%s: %v, want ErrBehindNotProven", b, err)
		}
	}
	if pauses, err := f.store.Pauses(ctx, f.tenant); err != nil || len(pauses) != 0 {
		t.Fatalf("pauses %v (%v), want none after proofs that did not hold", pauses, err)
	}
	lost := ledger.Behind{Kind: "dispatch", OperationID: uuid.Must(uuid.NewV7()), Version: 1}
	if n, err := f.store.LedgerBehind(ctx, lost); err != nil || n == 0 {
		t.Fatalf("a true loss: %d tenants paused, %v; want the tenants paused", n, err)
	}
	pauses, err := f.store.Pauses(ctx, f.tenant)
	if err != nil || len(pauses) != 1 || pauses[0].Reason != ledger.PauseLedgerBehind {
		t.Errorf("pauses %+v (%v), want one ledger_behind", pauses, err)
	}
}

// TestMayHaveBeenPrunedAsksTheTombstonesFirstAndTheHorizonOnlyBeforeThem:
// an id the ledger does not hold is a pruned operation's when its key
// tombstone says so, and a lost one's when it was made after the time
// from which every prune left a tombstone (tombstones_from, schema 041),
// even if a prune ran since. Only an id older than both the last prune
// batch and tombstones_from (a ledger that pruned before tombstones were
// kept, or whose tombstones went in turn) may have been pruned unseen.
func TestMayHaveBeenPrunedAsksTheTombstonesFirstAndTheHorizonOnlyBeforeThem(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	now := time.Now()
	at := func(d time.Duration) uuid.UUID {
		id := uuid.Must(uuid.NewV7())
		ms := uint64(now.Add(d).UnixMilli())
		for i := range 6 {
			id[i] = byte(ms >> (40 - 8*i))
		}
		return id
	}
	tombstoned := at(-48 * time.Hour)
	// What a prune batch writes (operationsPrune) after a ledger that
	// pruned before schema 041 (its horizon row starts tombstones_from at
	// the migration's time, here an hour ago).
	for _, q := range []string{
		`INSERT INTO key_tombstones (operation_id, tenant_id, action, key, params_fingerprint, external_key, pruned_at)
VALUES (@id, @tenant, 'supplier.create_order', 'po-pruned', 'fp', 'al_x', now())`,
		`INSERT INTO prune_horizon (pruned_through, tombstones_from) SELECT now(), now() - interval '1 hour' WHERE @id::uuid IS NOT NULL AND @tenant::uuid IS NOT NULL`,
	} {
		if _, err := f.pool.Exec(ctx, q, pgx.StrictNamedArgs{"id": tombstoned, "tenant": f.tenant}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		id     uuid.UUID
		pruned bool
	}{
		{"its tombstone is kept", tombstoned, true},
		{"made before tombstones were kept, none left", at(-2 * time.Hour), true},
		{"made after tombstones were kept and before the last prune, none left", at(-30 * time.Minute), false},
		{"made after the last prune", at(time.Hour), false},
		{"not a UUIDv7", uuid.New(), true},
	} {
		got, err := f.store.MayHaveBeenPruned(ctx, tc.id)
		if err != nil || got != tc.pruned {
			t.Errorf("%s: MayHaveBeenPruned = %v, %v; want %v", tc.name, got, err, tc.pruned)
		}
	}
	if _, err := f.store.LedgerBehind(ctx, ledger.Behind{Kind: "dispatch", OperationID: tombstoned, Version: 2}); !errors.Is(err, ledger.ErrBehindNotProven) {
		t.Errorf("a pause for the tombstoned operation: %v, want ErrBehindNotProven", err)
	}
}

// TestATenantMadeWhileTheLedgerIsBehindIsPausedToo: the ledger_behind
// pause stops every tenant there is when the loss is proven; one made
// afterwards is paused with the same reason and proof (schema 043), so
// none dispatches before the window is settled.
func TestATenantMadeWhileTheLedgerIsBehindIsPausedToo(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	before, err := f.store.EnsureTenant(ctx, "made before the loss")
	if err != nil {
		t.Fatal(err)
	}
	if pauses, err := f.store.Pauses(ctx, before); err != nil || len(pauses) != 0 {
		t.Fatalf("a tenant made while nothing is paused has pauses %+v (%v), want none", pauses, err)
	}
	lost := ledger.Behind{Kind: "dispatch", OperationID: uuid.Must(uuid.NewV7()), Version: 1}
	if _, err := f.store.LedgerBehind(ctx, lost); err != nil {
		t.Fatal(err)
	}
	after, err := f.store.EnsureTenant(ctx, "made after the loss")
	if err != nil {
		t.Fatal(err)
	}
	pauses, err := f.store.Pauses(ctx, after)
	if err != nil || len(pauses) != 1 || pauses[0].Reason != ledger.PauseLedgerBehind || pauses[0].Detail != lost.String() ||
		pauses[0].Provider != "" || pauses[0].Action != "" {
		t.Fatalf("the tenant made after the loss has pauses %+v (%v), want one of its whole dispatch, reason %s, detail %q",
			pauses, err, ledger.PauseLedgerBehind, lost.String())
	}
}
