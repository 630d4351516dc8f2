package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/ledger"
)

// recoverWindow is a since that puts every operation a test has just made
// in the window (after since minus the default margin).
func recoverWindow() time.Time { return time.Now().Add(-time.Minute) }

// statusOf is the operation's state and version as the ledger holds them.
func (f *fixture) statusOf(t *testing.T, id uuid.UUID) (ledger.Status, int64) {
	t.Helper()
	op, err := f.store.GetInternal(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return op.Status, op.Version
}

// TestRecoverRefusesASinceInTheFutureAndANegativeMargin: nothing can have
// changed after a time still to come (a mistyped date), and a negative
// margin would narrow the window behind the operator's back; neither
// moves or pauses anything.
func TestRecoverRefusesASinceInTheFutureAndANegativeMargin(t *testing.T) {
	t.Parallel()
	f := setup(t)
	op := testfactory.Operation(t, f.store, testfactory.OperationOpts{Tenant: f.acme})
	for _, tt := range []struct {
		name   string
		opts   ledger.RecoverOptions
		future bool
	}{
		{"an hour from now", ledger.RecoverOptions{Since: time.Now().Add(time.Hour)}, true},
		{"a year from now", ledger.RecoverOptions{Since: time.Now().AddDate(1, 0, 0), DryRun: true}, true},
		{"a negative margin", ledger.RecoverOptions{Since: recoverWindow(), Margin: -time.Minute}, false},
		{"no since at all", ledger.RecoverOptions{}, false},
	} {
		_, err := f.store.Recover(context.Background(), tt.opts)
		if err == nil || errors.Is(err, ledger.ErrRecoverySinceInFuture) != tt.future {
			t.Errorf("%s: %v, want a refusal (in the future: %v)", tt.name, err, tt.future)
		}
	}
	if got, v := f.statusOf(t, op.ID); got != ledger.StatusQueued || v != op.Version {
		t.Errorf("after refusals the operation is %s at version %d, want queued at %d", got, v, op.Version)
	}
	if pauses, err := f.store.Pauses(context.Background(), f.tenant); err != nil || len(pauses) != 0 {
		t.Errorf("pauses after refusals: %v %v, want none", pauses, err)
	}
}

// TestRecoverMakesUnknownOnlyTheWindowsApprovedUnsettledOperations: in
// the window, queued, retry_wait and dispatching operations whose lease
// expired become unknown (event ledger_recovery, first possible send at
// their last change, a dispatch message due now); a claim whose lease is
// live is left to its worker; unknown (already being settled), review (a
// person's), a proposal (nothing may send it) and every terminal state
// are left as they are, and so is a queued operation whose last change is
// before the window.
func TestRecoverMakesUnknownOnlyTheWindowsApprovedUnsettledOperations(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	expired := time.Now().Add(-time.Second)
	tests := []struct {
		name string
		opts testfactory.OperationOpts
		old  bool // last changed an hour before the window
		want ledger.Status
	}{
		{"queued", testfactory.OperationOpts{Status: ledger.StatusQueued}, false, ledger.StatusUnknown},
		{"retry_wait", testfactory.OperationOpts{Status: ledger.StatusRetryWait}, false, ledger.StatusUnknown},
		{"dispatching, lease expired", testfactory.OperationOpts{Status: ledger.StatusDispatching, LeaseUntil: expired}, false, ledger.StatusUnknown},
		{"dispatching, lease live", testfactory.OperationOpts{Status: ledger.StatusDispatching}, false, ledger.StatusDispatching},
		{"unknown", testfactory.OperationOpts{Status: ledger.StatusUnknown}, false, ledger.StatusUnknown},
		{"review", testfactory.OperationOpts{Status: ledger.StatusReview}, false, ledger.StatusReview},
		{"awaiting_approval", testfactory.OperationOpts{Status: ledger.StatusAwaitingApproval}, false, ledger.StatusAwaitingApproval},
		{"succeeded", testfactory.OperationOpts{Status: ledger.StatusSucceeded}, false, ledger.StatusSucceeded},
		{"failed", testfactory.OperationOpts{Status: ledger.StatusFailed}, false, ledger.StatusFailed},
		{"cancelled", testfactory.OperationOpts{Status: ledger.StatusCancelled}, false, ledger.StatusCancelled},
		{"held", testfactory.OperationOpts{Status: ledger.StatusHeld}, false, ledger.StatusHeld},
		{"queued before the window", testfactory.OperationOpts{Status: ledger.StatusQueued}, true, ledger.StatusQueued},
	}
	ops := make([]ledger.Operation, len(tests))
	for i, tt := range tests {
		tt.opts.Tenant = f.acme
		ops[i] = testfactory.Operation(t, f.store, tt.opts)
		if tt.old {
			testfactory.Backdate(t, f.pool, time.Hour, ops[i].ID)
		}
	}
	r, err := f.store.Recover(ctx, ledger.RecoverOptions{Since: recoverWindow()})
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		got, version := f.statusOf(t, ops[i].ID)
		moved := tt.want == ledger.StatusUnknown && ops[i].Status != ledger.StatusUnknown
		wantVersion := ops[i].Version
		if moved {
			wantVersion++
		}
		if got != tt.want || version != wantVersion {
			t.Errorf("%s: %s at version %d, want %s at %d", tt.name, got, version, tt.want, wantVersion)
		}
		events := f.count(t, `SELECT count(*) FROM operation_events WHERE operation_id = $1 AND kind = $2 AND to_status = 'unknown'`,
			ops[i].ID, ledger.EventLedgerRecovery)
		messages := f.count(t, `SELECT count(*) FROM outbox WHERE msg_id = 'dispatch.' || $1::text || '.' || $2::bigint`, ops[i].ID, wantVersion)
		sent := f.count(t, `SELECT count(*) FROM operations WHERE id = $1 AND first_sent_at IS NOT NULL AND last_sent_at >= updated_at`, ops[i].ID)
		if want := map[bool]int{true: 1}[moved]; events != want || (moved && (messages != 1 || sent != 1)) {
			t.Errorf("%s: %d ledger_recovery events (want %d), %d dispatch messages of the new version, sent times set %d",
				tt.name, events, want, messages, sent)
		}
	}
	want := map[ledger.Status]int{ledger.StatusQueued: 1, ledger.StatusRetryWait: 1, ledger.StatusDispatching: 1}
	if fmt.Sprint(r.Moved) != fmt.Sprint(want) || r.LiveLease != 1 || r.AlreadyUnknown != 1 || r.InReview != 1 || len(r.Sample) != 3 ||
		fmt.Sprint(r.Providers) != "[acme]" || r.MovedMeanwhile != 0 {
		t.Errorf("recovery %+v: want moved %v, 1 live lease, 1 already unknown, 1 in review, 3 sampled, providers [acme]", r, want)
	}
	if r.Oldest == nil || r.Oldest.After(ops[len(ops)-1].CreatedAt) {
		t.Errorf("oldest operation %v, want at or before the backdated one's creation %v", r.Oldest, ops[len(ops)-1].CreatedAt)
	}
	// A refusal after the recovery is not believed: the lost ledger may
	// have sent it.
	if open, err := f.store.OutcomeOpen(ctx, ops[0].ID); err != nil || !open {
		t.Errorf("outcome of the recovered queued operation open = %v (%v), want true", open, err)
	}
}

// TestRecoverDryRunChangesNothingAndCountsWhatARunMoves: a dry run moves,
// pauses and lifts nothing, and its counts are those the run then
// reports.
func TestRecoverDryRunChangesNothingAndCountsWhatARunMoves(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	var ops []ledger.Operation
	for _, st := range []ledger.Status{ledger.StatusQueued, ledger.StatusQueued, ledger.StatusRetryWait, ledger.StatusUnknown} {
		ops = append(ops, testfactory.Operation(t, f.store, testfactory.OperationOpts{Tenant: f.acme, Status: st}))
	}
	if _, err := f.store.LedgerBehind(ctx, ledger.Behind{Kind: "dispatch", OperationID: uuid.Must(uuid.NewV7()), Version: 2}); err != nil {
		t.Fatal(err)
	}
	outbox := f.count(t, `SELECT count(*) FROM outbox`)
	events := f.count(t, `SELECT count(*) FROM operation_events`)
	dry, err := f.store.Recover(ctx, ledger.RecoverOptions{Since: recoverWindow(), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if got, v := f.statusOf(t, op.ID); got != op.Status || v != op.Version {
			t.Errorf("after a dry run %s is %s at version %d, want %s at %d", op.Key, got, v, op.Status, op.Version)
		}
	}
	if got := f.count(t, `SELECT count(*) FROM outbox`); got != outbox {
		t.Errorf("outbox rows %d after a dry run, want %d", got, outbox)
	}
	if got := f.count(t, `SELECT count(*) FROM operation_events`); got != events {
		t.Errorf("events %d after a dry run, want %d", got, events)
	}
	pauses, err := f.store.Pauses(ctx, f.tenant)
	if err != nil || len(pauses) != 1 || pauses[0].Reason != ledger.PauseLedgerBehind {
		t.Errorf("pauses after a dry run %+v (%v), want the ledger_behind pause still there", pauses, err)
	}
	run, err := f.store.Recover(ctx, ledger.RecoverOptions{Since: recoverWindow()})
	if err != nil {
		t.Fatal(err)
	}
	if !dry.DryRun || dry.Total() != 3 || fmt.Sprint(dry.Moved) != fmt.Sprint(run.Moved) || dry.AlreadyUnknown != run.AlreadyUnknown ||
		dry.Detected != 1 || run.Detected != 1 {
		t.Errorf("dry run %+v, then the run %+v: want the same counts (3 moved, 1 ledger_behind pause found)", dry, run)
	}
}

// TestRecoverTwiceMovesNothingNew: the operations a recovery moved are
// unknown, which no recovery moves, so a second run (a rerun after an
// interruption, or by mistake) moves nothing and says they are unknown
// already.
func TestRecoverTwiceMovesNothingNew(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	for _, st := range []ledger.Status{ledger.StatusQueued, ledger.StatusRetryWait} {
		testfactory.Operation(t, f.store, testfactory.OperationOpts{Tenant: f.acme, Status: st})
	}
	since := recoverWindow()
	first, err := f.store.Recover(ctx, ledger.RecoverOptions{Since: since})
	if err != nil {
		t.Fatal(err)
	}
	events := f.count(t, `SELECT count(*) FROM operation_events`)
	second, err := f.store.Recover(ctx, ledger.RecoverOptions{Since: since})
	if err != nil {
		t.Fatal(err)
	}
	if first.Total() != 2 || second.Total() != 0 || second.AlreadyUnknown != 2 {
		t.Errorf("first run moved %d, second %d with %d already unknown; want 2, then 0 with 2 already unknown",
			first.Total(), second.Total(), second.AlreadyUnknown)
	}
	if got := f.count(t, `SELECT count(*) FROM operation_events`); got != events {
		t.Errorf("the second run wrote %d events, want none", got-events)
	}
	if pauses, err := f.store.Pauses(ctx, f.tenant); err != nil || len(pauses) != 0 {
		t.Errorf("pauses after two runs: %v %v, want none", pauses, err)
	}
}

// TestRecoverMovesTheWholeWindowAcrossBatchBoundaries: with two
// operations a batch, five queued operations take three transactions,
// and a live claim in the middle of the walk is skipped without stopping
// it; every queued one is moved exactly once.
func TestRecoverMovesTheWholeWindowAcrossBatchBoundaries(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	var queued []ledger.Operation
	for i := range 6 {
		if i == 3 {
			testfactory.Operation(t, f.store, testfactory.OperationOpts{Tenant: f.acme, Status: ledger.StatusDispatching})
			continue
		}
		queued = append(queued, testfactory.Operation(t, f.store, testfactory.OperationOpts{Tenant: f.acme}))
	}
	r, err := f.store.Recover(ctx, ledger.RecoverOptions{Since: recoverWindow(), Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Moved[ledger.StatusQueued] != 5 || r.Batches != 3 || r.LiveLease != 1 {
		t.Errorf("moved %v in %d batches, %d live leases; want 5 queued in 3 batches, 1 live lease", r.Moved, r.Batches, r.LiveLease)
	}
	for _, op := range queued {
		if got, v := f.statusOf(t, op.ID); got != ledger.StatusUnknown || v != op.Version+1 {
			t.Errorf("%s: %s at version %d, want unknown at %d", op.Key, got, v, op.Version+1)
		}
	}
}

// TestRecoverLiftsLedgerBehindPausesAndKeepsOperatorPauses: the
// recovery lifts the ledger_behind pauses (the proof's and its own) and
// releases what they held; an operator's pause of one provider stays, and
// an operator's pause of a whole tenant that took the reason ledger_behind
// keeps holding, as the operator's again.
func TestRecoverLiftsLedgerBehindPausesAndKeepsOperatorPauses(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	globex := testfactory.NewTenant(t, f.tokens, "globex")
	if err := f.store.PauseDispatch(ctx, ledger.WholeTenant(f.tenant), "beta", "", "operator:ops"); err != nil {
		t.Fatal(err)
	}
	if err := f.store.PauseDispatch(ctx, ledger.WholeTenant(globex.ID), "", "", "operator:globex-ops"); err != nil {
		t.Fatal(err)
	}
	initech := testfactory.NewTenant(t, f.tokens, "initech")
	if _, err := f.store.LedgerBehind(ctx, ledger.Behind{Kind: "dispatch", OperationID: uuid.Must(uuid.NewV7()), Version: 2}); err != nil {
		t.Fatal(err)
	}
	// Made after the ledger was found behind: paused by actledger, even
	// though the first ledger_behind pause is globex's operator's.
	hooli, err := f.store.EnsureTenant(ctx, "hooli")
	if err != nil {
		t.Fatal(err)
	}
	// Paused by its operator after the ledger was found behind: the
	// operator takes the pause over.
	if err := f.store.PauseDispatch(ctx, ledger.WholeTenant(initech.ID), "", "", "operator:initech-ops"); err != nil {
		t.Fatal(err)
	}
	// Made before the window, while dispatch was paused: its message was
	// published (the relay deletes the row) and its claim refused, so only
	// a release sends it again.
	waiting := testfactory.Operation(t, f.store, testfactory.OperationOpts{Tenant: f.acme})
	if n := f.count(t, `WITH d AS (DELETE FROM outbox WHERE msg_id LIKE 'dispatch.' || $1::text || '.%' RETURNING 1) SELECT count(*) FROM d`, waiting.ID); n != 1 {
		t.Fatalf("published %d dispatch messages of the waiting operation, want 1", n)
	}
	testfactory.Backdate(t, f.pool, time.Hour, waiting.ID)

	r, err := f.store.Recover(ctx, ledger.RecoverOptions{Since: recoverWindow()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Detected != 2 || r.Resumed != 2 || r.PausesKept != 2 || r.Released != 1 {
		t.Errorf("recovery %+v: want 2 ledger_behind pauses found and lifted (acme's, hooli's), 2 operator pauses kept, 1 operation released", r)
	}
	for _, tt := range []struct {
		name   string
		tenant uuid.UUID
		want   string
	}{
		{"acme", f.tenant, "[beta  operator:ops ]"},
		{"globex", globex.ID, "[  operator:globex-ops ]"},
		{"initech", initech.ID, "[  operator:initech-ops ]"},
		{"hooli", hooli, "[]"},
	} {
		pauses, err := f.store.Pauses(ctx, tt.tenant)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range pauses {
			got = append(got, fmt.Sprintf("%s %s %s %s", p.Provider, p.Action, p.PausedBy, p.Reason))
		}
		if fmt.Sprint(got) != tt.want {
			t.Errorf("%s's pauses after the recovery: %v, want %s", tt.name, got, tt.want)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM outbox WHERE msg_id LIKE 'dispatch.' || $1::text || '.%'`, waiting.ID); n != 1 {
		t.Errorf("the operation the pause held has %d dispatch messages, want 1 (released)", n)
	}
}

// TestRecoverCutShortLeavesDispatchPausedAndARerunFinishes: a recovery
// whose second batch fails (the primary went away in its middle) keeps the
// first batch's moves and leaves dispatch paused (ledger_behind), so that
// nothing of the window is sent from the state the restored ledger shows;
// the same recovery again moves the rest, and only the rest, and resumes.
func TestRecoverCutShortLeavesDispatchPausedAndARerunFinishes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	for range 5 {
		testfactory.Operation(t, f.store, testfactory.OperationOpts{Tenant: f.acme})
	}
	_, err := f.pool.Exec(ctx, `
CREATE FUNCTION fail_second_recovery_batch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.kind = 'ledger_recovery' AND (SELECT count(*) FROM operation_events WHERE kind = 'ledger_recovery') >= 2 THEN
        RAISE EXCEPTION 'the primary went away';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER fail_second_recovery_batch BEFORE INSERT ON operation_events FOR EACH ROW EXECUTE FUNCTION fail_second_recovery_batch();`)
	if err != nil {
		t.Fatal(err)
	}
	since := recoverWindow()
	cut, err := f.store.Recover(ctx, ledger.RecoverOptions{Since: since, Batch: 2})
	if err == nil || cut.Total() != 2 || cut.Batches != 1 {
		t.Fatalf("cut short: %+v, %v; want an error after one batch of 2", cut, err)
	}
	pauses, err := f.store.Pauses(ctx, f.tenant)
	if err != nil || len(pauses) != 1 || pauses[0].Reason != ledger.PauseLedgerBehind {
		t.Fatalf("pauses after a recovery cut short: %+v (%v), want dispatch paused (ledger_behind)", pauses, err)
	}
	if _, err := f.pool.Exec(ctx, `DROP TRIGGER fail_second_recovery_batch ON operation_events`); err != nil {
		t.Fatal(err)
	}
	rerun, err := f.store.Recover(ctx, ledger.RecoverOptions{Since: since, Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rerun.Total() != 3 || rerun.AlreadyUnknown != 2 || rerun.Resumed != 1 {
		t.Errorf("rerun: %+v; want the 3 left moved, the 2 moved before already unknown, dispatch resumed", rerun)
	}
	if n := f.count(t, `SELECT count(*) FROM operation_events WHERE kind = 'ledger_recovery'`); n != 5 {
		t.Errorf("%d ledger_recovery events, want 5: one per operation", n)
	}
}
