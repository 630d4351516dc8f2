package dispatcher_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/actledger/actledger/dispatcher"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
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

// TestDispatchMessageThatLiesChangesNothing: a dispatch message is only a
// pointer. One that names an operation that does not exist is refused as
// not found (the consumer terminates it), and one whose version is not
// the row's (an old one, or one the row never reached, which the handler
// takes as proof that the ledger is behind) for a proposal still awaiting
// approval claims nothing: the row, not the message, says whether the
// operation may be sent, and nothing reaches the supplier.
func TestDispatchMessageThatLiesChangesNothing(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, Mode: mocksupplier.Honour})
	d, err := dispatcher.New(p.Store, p.Broker, dispatcher.Config{Registry: p.Registry, LeaseDuration: p.Opts.Lease, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []int64{1, 7} {
		err := d.Execute(context.Background(), "acme", ledger.Dispatch{OperationID: uuid.New(), Version: version})
		if !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("a message naming a made-up operation at version %d: %v, want not found", version, err)
		}
	}
	status, out := p.Propose("po-lie", `{"sku":"A-1","qty":3}`)
	if status != http.StatusAccepted {
		t.Fatalf("propose: %d %v", status, out)
	}
	op := p.Operation(out)
	for _, version := range []int64{op.Version, op.Version + 1, 99} {
		err := d.Execute(context.Background(), "acme", ledger.Dispatch{OperationID: op.ID, Version: version})
		if version > op.Version && (err == nil || !strings.Contains(err.Error(), "the ledger holds version")) {
			t.Fatalf("a message at version %d for a proposal at %d: %v, want the ledger behind", version, op.Version, err)
		}
		if version == op.Version && err != nil {
			t.Fatalf("a message at version %d for a proposal: %v", version, err)
		}
		if got := p.Get(op); got.Status != ledger.StatusAwaitingApproval || got.Version != op.Version {
			t.Fatalf("after a message at version %d the proposal is %s v%d, want awaiting_approval v%d; history:\n%s",
				version, got.Status, got.Version, op.Version, p.History(op))
		}
	}
	if n := p.Supplier.TotalOrders(); n != 0 {
		t.Errorf("orders at the supplier = %d, want 0", n)
	}
}
