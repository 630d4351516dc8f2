package ledger_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/internal/testpoll"
	"github.com/actledger/actledger/ledger"
)

// derivedKeyShape is the spelling of a derived external key: "al_" and a
// version-8 UUID, 39 characters, as every key before it was long.
var derivedKeyShape = regexp.MustCompile(`^al_[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestExternalKeyOfIsTheBusinessIdentityAlone: the same tenant, action and
// key always make the same external key, and any other identity another,
// including those a plain concatenation would confuse; every key has the
// shape and length suppliers were sent before.
func TestExternalKeyOfIsTheBusinessIdentityAlone(t *testing.T) {
	t.Parallel()
	tenant, other := uuid.MustParse("0193a4c2-0000-7000-8000-000000000001"), uuid.MustParse("0193a4c2-0000-7000-8000-000000000002")
	base := ledger.ExternalKeyOf(tenant, "supplier.create_order", "po-1")
	for _, tc := range []struct {
		name        string
		tenant      uuid.UUID
		action, key string
		same        bool
	}{
		{"the same identity", tenant, "supplier.create_order", "po-1", true},
		{"another tenant", other, "supplier.create_order", "po-1", false},
		{"another action", tenant, "supplier.cancel_order", "po-1", false},
		{"another key", tenant, "supplier.create_order", "po-2", false},
		{"the key's first byte moved into the action", tenant, "supplier.create_orderp", "o-1", false},
		{"the action's last byte moved into the key", tenant, "supplier.create_orde", "rpo-1", false},
		{"an empty key", tenant, "supplier.create_order", "", false},
	} {
		got := ledger.ExternalKeyOf(tc.tenant, tc.action, tc.key)
		if !derivedKeyShape.MatchString(got) || len(got) != 39 {
			t.Errorf("%s: %q is not al_ and a version-8 UUID of 39 characters", tc.name, got)
		}
		if (got == base) != tc.same {
			t.Errorf("%s: %q against %q, same = %v, want %v", tc.name, got, base, got == base, tc.same)
		}
	}
}

// TestAnOperationAskedAgainAfterItsRowWasLostSendsTheSameExternalKey: the
// ledger lost an operation's row (a failover to an asynchronous replica,
// a restore), and the agent asks again under the same key, as an enqueue
// or as a proposal: the new operation has a new id and the external key
// of the first, so its supplier's dedup and the lookup find the first
// effect; a lookup by that key finds the new operation.
func TestAnOperationAskedAgainAfterItsRowWasLostSendsTheSameExternalKey(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	const params = `{"sku":"A-1","qty":2}`
	for _, tc := range []struct {
		name  string
		again func(key string) ledger.Operation
	}{
		{"enqueued again", func(key string) ledger.Operation {
			op, _ := f.queued(t, key, params)
			return op
		}},
		{"proposed again", func(key string) ledger.Operation {
			return testfactory.Operation(t, f.store, testfactory.OperationOpts{Tenant: f.acme, Key: key, Params: params,
				Status: ledger.StatusAwaitingApproval})
		}},
	} {
		key := "po-lost-" + tc.name
		first, _ := f.queued(t, key, params)
		if want := ledger.ExternalKeyOf(f.tenant, action, key); first.ExternalKey != want {
			t.Fatalf("%s: a new operation's external key %q, want %q", tc.name, first.ExternalKey, want)
		}
		testfactory.Lose(t, f.pool, first.ID)
		again := tc.again(key)
		if again.ID == first.ID || again.ExternalKey != first.ExternalKey {
			t.Errorf("%s: operation %s with external key %q, want a new id with %q", tc.name, again.ID, again.ExternalKey, first.ExternalKey)
		}
		stored, err := f.store.Get(ctx, ledger.WholeTenant(f.tenant), again.ID)
		if err != nil || stored.ExternalKey != first.ExternalKey {
			t.Errorf("%s: stored %q (%v), want %q", tc.name, stored.ExternalKey, err, first.ExternalKey)
		}
		if got, err := f.store.GetByExternalKey(ctx, first.ExternalKey); err != nil || got.ID != again.ID {
			t.Errorf("%s: GetByExternalKey = %s, %v; want %s", tc.name, got.ID, err, again.ID)
		}
	}
}

// TestOperationsMadeBeforeDerivedKeysKeepTheirKeysAndAreFoundByThem: an
// operation stored by the previous release keeps 'al_' || id, and
// evidence (GetByExternalKey) and a statement page (StatementOperations)
// still find it by that key, beside an operation of a derived key.
func TestOperationsMadeBeforeDerivedKeysKeepTheirKeysAndAreFoundByThem(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	old := testfactory.OperationOfPreviousRelease(t, f.store, f.pool, "TEST.ops.acme",
		testfactory.OperationOpts{Tenant: f.acme, Key: "po-old", Params: `{"sku":"A-1"}`})
	if want := ledger.ExternalKeyOfID(old.ID); old.ExternalKey != want {
		t.Fatalf("the previous release's operation: %q, want %q", old.ExternalKey, want)
	}
	derived, _ := f.queued(t, "po-new", `{"sku":"A-2"}`)
	for _, tc := range []struct {
		key  string
		want uuid.UUID
	}{
		{old.ExternalKey, old.ID},
		{derived.ExternalKey, derived.ID},
		{ledger.ExternalKeyOf(f.tenant, action, "po-old"), uuid.Nil}, // what it would be had it been made today
		{ledger.ExternalKeyOfID(derived.ID), uuid.Nil},
	} {
		got, err := f.store.GetByExternalKey(ctx, tc.key)
		if got.ID != tc.want || (tc.want == uuid.Nil) != (err != nil) {
			t.Errorf("GetByExternalKey(%q) = %s, %v; want %s", tc.key, got.ID, err, tc.want)
		}
	}
	page, err := f.store.StatementOperations(ctx, "acme", []string{old.ExternalKey, derived.ExternalKey, "al_nobody"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 2 || page[old.ExternalKey].ID != old.ID || page[derived.ExternalKey].ID != derived.ID {
		t.Errorf("StatementOperations = %v, want the old and the derived operation by their keys", page)
	}
	if other, err := f.store.StatementOperations(ctx, "other", []string{old.ExternalKey, derived.ExternalKey}); err != nil || len(other) != 0 {
		t.Errorf("another provider's page: %v, %v; want nothing", other, err)
	}
}

// TestAKeyAskedAgainWhileItsPruneCommitsFindsTheTombstone: an enqueue
// under a key whose operation a prune is deleting waits for the prune
// (ON CONFLICT waits on the row), then inserts; its check of the key's
// tombstones runs after that insert, so it sees the tombstone the prune
// committed meanwhile: other params are refused as a conflict, never
// stored under the pruned operation's external key.
func TestAKeyAskedAgainWhileItsPruneCommitsFindsTheTombstone(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	op, _ := f.queued(t, "po-pruning", `{"sku":"A-1"}`)
	a := f.approve(t, `{"sku":"B-2"}`, 1)

	// The prune's transaction, as operationsPrune writes it: the history
	// and the row go, the tombstone comes.
	prune, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer prune.Rollback(ctx)
	var pid int
	if err := prune.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT set_config('actledger.prune', 'on', true) WHERE $1::uuid IS NOT NULL`,
		`DELETE FROM operation_events WHERE operation_id = $1`,
		`DELETE FROM outbox WHERE split_part(msg_id, '.', 2) = $1::text`,
		`INSERT INTO key_tombstones (operation_id, tenant_id, action, key, params_fingerprint, scope, external_key, pruned_at)
SELECT id, tenant_id, action, key, params_fingerprint, scope, external_key, now() FROM operations WHERE id = $1`,
		`DELETE FROM operations WHERE id = $1`,
	} {
		if _, err := prune.Exec(ctx, q, op.ID); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	enqueued := make(chan error, 1)
	go func() {
		_, _, err := f.enqueue("po-pruning", `{"sku":"B-2"}`, a.ID)
		enqueued <- err
	}()
	testpoll.Until(t, 10*time.Second, func() error {
		if f.count(t, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))`, pid) == 0 {
			return errors.New("the enqueue never waited for the prune")
		}
		return nil
	})
	if err := prune.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-enqueued; !errors.Is(err, ledger.ErrKeyConflict) {
		t.Errorf("enqueue with other params while the key's prune committed: %v, want ErrKeyConflict", err)
	}
	if n := f.count(t, `SELECT count(*) FROM operations WHERE key = 'po-pruning'`); n != 0 {
		t.Errorf("%d operations under the pruned key, want none", n)
	}
}
