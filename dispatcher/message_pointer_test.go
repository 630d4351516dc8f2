package dispatcher_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/actledger/actledger/dispatcher"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/mocksupplier"
)

// TestDispatchMessageOnAnotherProvidersSubjectChangesNothing: a dispatch
// message is only a pointer to a row. One that names a new operation of
// provider acme but arrives on provider beta's subject (misrouted, or
// published by anyone who can reach the stream) neither claims the
// operation under beta's account nor holds it as sent to the wrong one:
// the operation stays queued for its own provider, which then sends it
// once.
func TestDispatchMessageOnAnotherProvidersSubjectChangesNothing(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, Mode: mocksupplier.Honour})
	p.Retarget("beta", ledger.Target{Account: "acct_beta", Environment: "test"})
	op := p.Enqueue("po-1", `{"sku":"A-1","qty":3}`)

	d, err := dispatcher.New(p.Store, p.Broker, dispatcher.Config{Registry: p.Registry, LeaseDuration: p.Opts.Lease, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Execute(context.Background(), "beta", ledger.Dispatch{OperationID: op.ID, Version: op.Version}); err != nil {
		t.Fatalf("execute a message from beta's subject: %v", err)
	}
	if got := p.Get(op); got.Status != ledger.StatusQueued || got.Version != op.Version {
		t.Fatalf("after a message on another provider's subject the operation is %s v%d, want queued v%d; history:\n%s",
			got.Status, got.Version, op.Version, p.History(op))
	}
	if got := p.Creates(op) + len(p.Other.CreateRequests(op.ExternalKey)); got != 0 {
		t.Fatalf("create requests at the suppliers = %d, want 0", got)
	}

	p.Start(1)
	p.WaitStatus(op, ledger.StatusSucceeded, settle)
	if got := p.Orders(op); got != 1 {
		t.Errorf("orders at acme = %d, want 1", got)
	}
	if kinds := strings.Join(p.Kinds(op), ","); strings.Count(kinds, "claimed") != 1 {
		t.Errorf("events %s: want one claim, by acme's worker", kinds)
	}
}
