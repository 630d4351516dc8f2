package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/actledger/actledger/ledger"
)

func TestClaimLeaseEndsOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	f := setup(t)
	op, _ := f.queued(t, "po-1", `{"sku":"A-1"}`)
	claimed, lapse, err := f.store.Claim(context.Background(), ledger.Change{
		ID: op.ID, From: ledger.StatusQueued, Version: op.Version, To: ledger.StatusDispatching,
		Kind: "claimed", Actor: "worker:a", LeaseOwner: "a", LeaseFor: time.Minute,
	}, testTarget)
	if err != nil || lapse != ledger.LapseNone {
		t.Fatal(err, lapse)
	}
	var dbNow time.Time
	if err := f.pool.QueryRow(context.Background(), `SELECT now()`).Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	if got := claimed.LeaseExpiresAt.Sub(claimed.UpdatedAt); got != time.Minute {
		t.Errorf("lease = %s after the claim's database time, want 1m", got)
	}
	if skew := dbNow.Sub(claimed.UpdatedAt); skew < 0 || skew > 5*time.Second {
		t.Errorf("claim stamped %s, database clock %s", claimed.UpdatedAt, dbNow)
	}
}

func TestConfirmClaimHoldsOnlyForItsOwnerAndFencesOlderVersions(t *testing.T) {
	t.Parallel()
	f := setup(t)
	op, a := f.queued(t, "po-1", `{"sku":"A-1"}`)
	ctx := context.Background()
	claimed, _, err := f.store.Claim(ctx, ledger.Change{
		ID: op.ID, From: ledger.StatusQueued, Version: op.Version, To: ledger.StatusDispatching,
		Kind: "claimed", Actor: "worker:a", LeaseOwner: "a", LeaseFor: 10 * time.Second,
	}, testTarget)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.ConfirmClaim(ctx, op.ID, claimed.Version, "b", time.Minute, testTarget); !errors.Is(err, ledger.ErrStale) {
		t.Errorf("another owner's confirmation: err = %v, want ErrStale", err)
	}
	if _, err := f.store.ConfirmClaim(ctx, op.ID, claimed.Version-1, "a", time.Minute, testTarget); !errors.Is(err, ledger.ErrStale) {
		t.Errorf("an older version's confirmation: err = %v, want ErrStale", err)
	}
	conf, err := f.store.ConfirmClaim(ctx, op.ID, claimed.Version, "a", time.Minute, testTarget)
	if err != nil {
		t.Fatal(err)
	}
	if conf.Version != claimed.Version+1 || conf.LeaseExpiresAt.Before(conf.Now.Add(time.Minute)) || conf.Lapse != ledger.LapseNone {
		t.Errorf("confirmation %+v: want version %d, lease to at least now+1m, no lapse", conf, claimed.Version+1)
	}
	// A sweeper that read the claim before is fenced by the version; one
	// that read it after, by the lease that is not expired.
	for _, version := range []int64{claimed.Version, conf.Version} {
		_, err := f.store.Transition(ctx, ledger.Change{
			ID: op.ID, From: ledger.StatusDispatching, Version: version, To: ledger.StatusUnknown,
			Kind: "lease_expired", Actor: "sweeper:test", OnlyIfLeaseExpired: true, SentAt: time.Now(),
		})
		if !errors.Is(err, ledger.ErrStale) {
			t.Errorf("expiry at version %d: err = %v, want ErrStale", version, err)
		}
	}
	// A shorter hold never shortens the lease; a revoke is seen at once.
	if _, _, err := f.store.RevokeApproval(ctx, ledger.WholeTenant(f.tenant), a.ID, "approver:test"); err != nil {
		t.Fatal(err)
	}
	again, err := f.store.ConfirmClaim(ctx, op.ID, conf.Version, "a", time.Second, testTarget)
	if err != nil {
		t.Fatal(err)
	}
	if !again.LeaseExpiresAt.Equal(conf.LeaseExpiresAt) || again.Lapse != ledger.LapseApprovalRevoked {
		t.Errorf("confirmation %+v: want lease %s kept and lapse %s", again, conf.LeaseExpiresAt, ledger.LapseApprovalRevoked)
	}
}

func TestOutcomeOpenUntilALookupConfirmsAbsence(t *testing.T) {
	t.Parallel()
	f := setup(t)
	op, _ := f.queued(t, "po-1", `{"sku":"A-1"}`)
	ctx := context.Background()
	steps := []struct {
		kind   ledger.EventKind
		detail map[string]any
		open   bool
	}{
		{"attempt", map[string]any{"class": "not_executed"}, false},
		{"attempt", map[string]any{"class": "unknown"}, true},
		{"lookup_absent_too_early", map[string]any{"lookup": "absent"}, true},
		{"lookup_absent_confirmed", map[string]any{"lookup": "absent"}, false},
		{"attempt", map[string]any{"class": "rejected"}, false},
		{"lease_expired", map[string]any{}, true},
	}
	for i, s := range steps {
		if err := f.store.AppendEvent(ctx, op.ID, s.kind, "worker:test", s.detail); err != nil {
			t.Fatal(err)
		}
		open, err := f.store.OutcomeOpen(ctx, op.ID)
		if err != nil || open != s.open {
			t.Errorf("after %d %s %v: open = %v (%v), want %v", i, s.kind, s.detail, open, err, s.open)
		}
	}
}

// TestClaimAndConfirmForAnotherTargetLapseAsMismatch: the claim and the
// confirmation before every call both compare the approval's bound
// account and environment with the ones the worker would call, and an
// approval granted without them is refused.
func TestClaimAndConfirmForAnotherTargetLapseAsMismatch(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	if _, err := f.store.CreateApproval(ctx, ledger.NewApproval{
		TenantID: f.tenant, ApproverTokenID: f.approver.TokenID, Action: "a",
		Params: []byte(`{}`), PolicyVersion: "p1", ExpiresAt: time.Now().Add(time.Hour),
	}); !errors.Is(err, ledger.ErrNoTarget) {
		t.Errorf("approval without a target: err = %v, want ErrNoTarget", err)
	}
	if _, _, err := f.store.Propose(ctx, ledger.ProposeRequest{
		TenantID: f.tenant, TokenID: f.agent.TokenID, Action: action, Key: "auto-1", Provider: "acme",
		Params: []byte(`{}`), RequestTTL: time.Hour,
		AutoApproval: &ledger.Decision{Approver: "policy:p1", PolicyVersion: "p1", TTL: time.Hour},
	}); !errors.Is(err, ledger.ErrNoTarget) {
		t.Errorf("policy approval without a target: err = %v, want ErrNoTarget", err)
	}
	op, _ := f.queued(t, "po-1", `{"sku":"A-1"}`)
	elsewhere := ledger.Target{Account: testTarget.Account, Environment: "live"}
	claimed, lapse, err := f.store.Claim(ctx, ledger.Change{
		ID: op.ID, From: ledger.StatusQueued, Version: op.Version, To: ledger.StatusDispatching,
		Kind: "claimed", Actor: "worker:a", LeaseOwner: "a", LeaseFor: time.Minute,
	}, elsewhere)
	if err != nil || lapse != ledger.LapseApprovalMismatch {
		t.Fatalf("claim for another environment: lapse %q, err %v; want %q", lapse, err, ledger.LapseApprovalMismatch)
	}
	conf, err := f.store.ConfirmClaim(ctx, op.ID, claimed.Version, "a", time.Minute, testTarget)
	if err != nil || conf.Lapse != ledger.LapseNone {
		t.Fatalf("confirm for the approved target: lapse %q, err %v", conf.Lapse, err)
	}
	conf, err = f.store.ConfirmClaim(ctx, op.ID, conf.Version, "a", time.Minute, elsewhere)
	if err != nil || conf.Lapse != ledger.LapseApprovalMismatch {
		t.Errorf("confirm for another environment: lapse %q, err %v; want %q", conf.Lapse, err, ledger.LapseApprovalMismatch)
	}
}

// A connection caches a statement's plan after a few runs; the ledger
// grows under it, and without fresh statistics nothing replaces that plan.
// A plan made while operations was small (a hash join over a sequential
// scan) would then read the whole ledger on every transition. Transitions
// are planned with index lookups only, whatever the table's size was.
func TestTransitionsReadOnlyTheirOperationsAfterTheLedgerGrows(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	conn, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	a := f.approve(t, `{"sku":"A-1"}`, 100)
	claim := func(key string) (ledger.Change, error) {
		op, _, err := f.enqueue(key, `{"sku":"A-1"}`, a.ID)
		return ledger.Change{
			ID: op.ID, From: ledger.StatusQueued, Version: op.Version, To: ledger.StatusDispatching,
			Kind: "claimed", Actor: "worker:a", LeaseOwner: "a", LeaseFor: time.Minute,
		}, err
	}
	// Enough runs on this connection, while the ledger is small, for the
	// plans to be cached.
	for i := range 10 {
		c, err := claim(fmt.Sprintf("small-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.TransitionOn(ctx, conn, c); err != nil {
			t.Fatal(err)
		}
	}
	_, err = f.pool.Exec(ctx, `
INSERT INTO operations (id, tenant_id, action, key, provider, params, params_fingerprint, approval_id, requested_by, external_key, status)
SELECT g.id, $1, 'grown', 'k' || g.n, 'acme', '{}', 'f', $2, $3, 'al_' || g.id, 'succeeded'
FROM (SELECT n, gen_random_uuid() AS id FROM generate_series(1, 20000) n) g`, f.tenant, a.ID, f.agent.TokenID)
	if err != nil {
		t.Fatal(err)
	}
	c, err := claim("after-growth")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := f.store.TransitionOn(ctx, tx, c); err != nil {
		t.Fatal(err)
	}
	var seqRead int64
	err = tx.QueryRow(ctx, `SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_xact_user_tables WHERE relname = 'operations'`).Scan(&seqRead)
	if err != nil {
		t.Fatal(err)
	}
	if seqRead > 100 {
		t.Errorf("one transition read %d operations rows sequentially, want only its own by index", seqRead)
	}
}

// TestClaimNamingAnotherProviderWritesNothing: a claim that names the
// provider whose dispatch message it acts on applies only to that
// provider's operation; for another's it is stale and leaves no trace.
func TestClaimNamingAnotherProviderWritesNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	op, _ := f.queued(t, "po-1", `{"sku":"A-1"}`)
	ctx := context.Background()
	claim := func(provider string) error {
		_, _, err := f.store.Claim(ctx, ledger.Change{
			ID: op.ID, From: ledger.StatusQueued, Version: op.Version, To: ledger.StatusDispatching,
			Kind: "claimed", Actor: "worker:a", LeaseOwner: "a", LeaseFor: time.Minute, Provider: provider,
		}, testTarget)
		return err
	}
	if err := claim("beta"); !errors.Is(err, ledger.ErrStale) {
		t.Fatalf("claim for provider beta of an acme operation: err = %v, want ErrStale", err)
	}
	after, err := f.store.GetInternal(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Status != ledger.StatusQueued || after.Version != op.Version {
		t.Fatalf("after the other provider's claim: %s at version %d, want queued at %d", after.Status, after.Version, op.Version)
	}
	if err := claim("acme"); err != nil {
		t.Fatalf("claim for its own provider: %v", err)
	}
}
