package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// recoverRun runs `actledger recover args...` with env and returns its
// exit status and output.
func recoverRun(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := exitStatus(run(t.Context(), append([]string{"recover"}, args...), func(k string) string { return env[k] }, &stdout, &stderr), &stderr)
	return code, stdout.String() + stderr.String()
}

// TestRecoverCommandSaysWhatItMovesWarnsOfTheWholeLedgerAndMovesNothingTheSecondTime:
// a dry run says what would move and that a window before the oldest
// operation is the whole ledger, and changes nothing; the run moves the
// same, lifts the ledger_behind pause and names the reconciliation of the
// window; a second run moves nothing new and says so.
func TestRecoverCommandSaysWhatItMovesWarnsOfTheWholeLedgerAndMovesNothingTheSecondTime(t *testing.T) {
	t.Parallel()
	pool, url := testdb.NewWithURL(t)
	store := ledger.New(pool, ledger.Config{Subjects: broker.Subjects{Prefix: broker.DefaultPrefix}})
	tokens, err := auth.New(pool, store, auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	acme := testfactory.NewTenant(t, tokens, "acme")
	queued := testfactory.Operation(t, store, testfactory.OperationOpts{Tenant: acme})
	testfactory.Operation(t, store, testfactory.OperationOpts{Tenant: acme, Status: ledger.StatusRetryWait})
	if _, err := store.LedgerBehind(context.Background(), ledger.Behind{Kind: "dispatch", OperationID: uuid.Must(uuid.NewV7()), Version: 2}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": url}
	steps := []struct {
		name string
		args []string
		want []string
	}{
		{"dry run", []string{"--since", "1h", "--dry-run"}, []string{
			"dry run: nothing was changed", "warning: the window starts before the oldest operation",
			"would move to unknown (event ledger_recovery): 2", "  queued       1", "  retry_wait   1",
			"ledger_behind pauses: 1 made by a proof of the loss", "actledger reconcile acme --since "}},
		{"run", []string{"--since", "1h"}, []string{
			"moved to unknown (event ledger_recovery): 2", queued.ID.String(),
			"ledger_behind pauses lifted: the recovery's own, and 1 a proof of the loss had made", "dispatch resumed for 1 tenant(s)",
			"actledger reconcile acme --since "}},
		{"again", []string{"--since", "1h"}, []string{
			"moved to unknown (event ledger_recovery): 0", "already unknown                2", "nothing new to move",
			"actledger reconcile acme --since "}},
	}
	for _, step := range steps {
		code, out := recoverRun(t, env, step.args...)
		if code != 0 {
			t.Fatalf("%s: exit %d:\n%s", step.name, code, out)
		}
		for _, want := range step.want {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", step.name, want, out)
			}
		}
		got, err := store.GetInternal(context.Background(), queued.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]ledger.Status{true: ledger.StatusQueued, false: ledger.StatusUnknown}[step.name == "dry run"]; got.Status != want {
			t.Errorf("%s: the queued operation is %s, want %s", step.name, got.Status, want)
		}
	}
	if pauses, err := store.Pauses(context.Background(), acme.ID); err != nil || len(pauses) != 0 {
		t.Errorf("pauses after the runs: %v %v, want none", pauses, err)
	}
}

// TestRecoverAfterARestoreSettlesWhatTheLostLedgerSentWithOneOrder: a
// restore left the ledger behind its messages (a lost operation's
// dispatch message pauses dispatch) and behind the supplier: the supplier
// holds an order the lost ledger sent for an operation the restored
// ledger shows queued, and another operation it shows queued was never
// sent. The supplier neither honours idempotency keys nor is looked up at
// once (a visibility lag), so a create from queued would make a second
// order. `actledger recover` makes both unknown and resumes dispatch; the
// dispatcher's lookup finds the first order (succeeded, one order), and
// the other, absent once the lag has passed, is sent (one order).
func TestRecoverAfterARestoreSettlesWhatTheLostLedgerSentWithOneOrder(t *testing.T) {
	t.Parallel()
	pool, url := testdb.NewWithURL(t)
	p := testpipeline.New(t, testpipeline.Options{Pool: pool, Mode: mocksupplier.Ignore, LookupLag: 300 * time.Millisecond})
	p.Start(1)
	lost := ledger.DispatchMessage{Subject: p.Broker.DispatchSubject("acme"), OperationID: uuid.Must(uuid.NewV7()), Version: 3}.Outbox()
	msg := &nats.Msg{Subject: lost.Subject, Data: lost.Payload, Header: nats.Header{}}
	msg.Header.Set(nats.MsgIdHdr, lost.MsgID)
	if _, err := p.Broker.JetStream().PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	p.Eventually(30*time.Second, "dispatch paused for ledger_behind", func() bool {
		pauses, err := p.Store.Pauses(t.Context(), p.TenantID)
		return err == nil && len(pauses) == 1 && pauses[0].Reason == ledger.PauseLedgerBehind
	})
	sent := p.Enqueue("po-sent-by-the-lost-ledger", `{"sku":"A-1","qty":1}`)
	unsent := p.Enqueue("po-never-sent", `{"sku":"A-1","qty":2}`)
	// Settled, not NothingMore: its move of the pipeline's clock would
	// set the supplier's apart from the command's, which reads the real
	// one.
	p.Settled(30 * time.Second)
	for _, op := range []ledger.Operation{sent, unsent} {
		if got := p.Get(op); got.Status != ledger.StatusQueued || p.Orders(op) != 0 {
			t.Fatalf("%s while paused: %s with %d orders, want queued with none", op.Key, got.Status, p.Orders(op))
		}
	}
	// What the lost ledger's worker made at the supplier.
	p.Supplier.SeedOrder(mocksupplier.Seed{ClientReference: sent.ExternalKey, Params: sent.Params})

	code, out := recoverRun(t, map[string]string{"DATABASE_URL": url, "STREAM_PREFIX": p.Broker.Subjects().Prefix}, "--since", "5m")
	if code != 0 || !strings.Contains(out, "moved to unknown (event ledger_recovery): 2") || !strings.Contains(out, "1 a proof of the loss had made") {
		t.Fatalf("recover: exit %d:\n%s", code, out)
	}
	for _, tt := range []struct {
		op   ledger.Operation
		kind ledger.EventKind
	}{
		{sent, ledger.EventLookupFound},
		{unsent, ledger.EventLookupAbsentConfirmed},
	} {
		p.WaitStatus(tt.op, ledger.StatusSucceeded, 60*time.Second)
		kinds := p.Kinds(tt.op)
		if !slices.Contains(kinds, string(ledger.EventLedgerRecovery)) || !slices.Contains(kinds, string(tt.kind)) {
			t.Errorf("%s's history %v: want %s, then %s", tt.op.Key, kinds, ledger.EventLedgerRecovery, tt.kind)
		}
		if got := p.Orders(tt.op); got != 1 {
			t.Errorf("%s: %d orders at the supplier, want exactly 1", tt.op.Key, got)
		}
	}
	if pauses, err := p.Store.Pauses(t.Context(), p.TenantID); err != nil || len(pauses) != 0 {
		t.Errorf("pauses after the recovery: %v %v, want none", pauses, err)
	}
}
