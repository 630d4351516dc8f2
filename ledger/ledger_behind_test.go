package ledger_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

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
