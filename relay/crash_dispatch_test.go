package relay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/relay"
)

// TestRelayCrashAfterPublishBeforeDeleteCreatesOneOrder: a relay dies
// after JetStream acknowledged an operation's dispatch message and before
// the delete of its outbox row committed. The row stays; the pipeline's
// own relay publishes it again under the same Nats-Msg-Id, and the
// dispatcher, which may see the message twice (JetStream's duplicate
// window absorbs the second publish; a republish after the window would
// reach the consumer and meet the claim's version condition), sends the
// operation to the supplier once. Counted at the supplier, and the outbox
// is empty afterwards: the republished row was deleted.
func TestRelayCrashAfterPublishBeforeDeleteCreatesOneOrder(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, Mode: mocksupplier.Honour})
	op := p.Enqueue("po-crash", `{"sku":"A-1","qty":2}`)

	crashing := newRelay(t, p.Pool, p.Broker, relay.Config{Logger: quiet()})
	crashing.TestHooks.BeforeDelete = func() error { return errors.New("crash before delete") }
	if _, err := crashing.PublishBatch(context.Background()); err == nil {
		t.Fatal("the crashing batch reported success")
	}
	if got := outboxRows(t, p.Pool); got != 1 {
		t.Fatalf("outbox rows after the crash = %d, want 1 (published, not deleted)", got)
	}

	p.Start(1)
	p.WaitStatus(op, ledger.StatusSucceeded, 30*time.Second)
	p.Settled(30 * time.Second)
	if got := p.Orders(op); got != 1 {
		t.Errorf("orders at the supplier = %d, want 1", got)
	}
	if got := p.Creates(op); got != 1 {
		t.Errorf("create requests at the supplier = %d, want 1", got)
	}
	var left int
	if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE msg_id LIKE 'dispatch.' || $1::text || '.%'`, op.ID).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("dispatch rows of the operation after the republish = %d, want 0 (deleted once published)", left)
	}
}
