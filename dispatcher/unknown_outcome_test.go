package dispatcher_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// The first create's answer is lost after the order was committed; the
// resend under the idempotency key is refused before any effect (429, as a
// rate limiter in front of the supplier answers before the key is looked
// at; the mock supplier in Ignore mode takes its next fault on the resend).
// The refusal proves nothing about the first order, so the operation is
// not "confirmed not executed": revoking the approval must not hold it as
// never sent. It is never sent again, and the lookup settles it.
func TestRefusedResendAfterAnUnknownOutcomeIsNotHeldByARevoke(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("",
		mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit},
		mocksupplier.Fault{Kind: mocksupplier.RateLimit429, RetryAfterS: 3})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.Eventually(settle, "the resend to be refused", func() bool {
		got := p.Get(op)
		return p.Creates(op) == 2 && got.Status != ledger.StatusDispatching && got.Version > 4
	})
	if got := p.Get(op); got.Status == ledger.StatusRetryWait {
		t.Errorf("status %s after a refused resend while the first attempt's outcome is unknown; history:\n%s", got.Status, p.History(op))
	}
	if status, out := p.Do("POST", "/v1/approvals/"+op.ApprovalID.String()+"/revoke", p.Approver, ""); status != http.StatusOK {
		t.Fatalf("revoke: %d %v", status, out)
	}
	if got := p.Get(op); got.Status == ledger.StatusHeld {
		t.Fatalf("held (\"nothing was sent\") although the first order exists; history:\n%s", p.History(op))
	}
	done := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	if p.Orders(op) != 1 || p.Creates(op) != 2 || done.ProviderReference == nil {
		t.Errorf("orders %d, create requests %d, reference %v; want 1, 2 (nothing sent after the revoke) and the order's; history:\n%s",
			p.Orders(op), p.Creates(op), done.ProviderReference, p.History(op))
	}
}

// resetThenLate is a provider whose first create sees its connection
// reset at once while the request goes on at the supplier, which commits
// it after late (still inside the call's timeout).
type resetThenLate struct {
	provider.Provider
	late  time.Duration
	calls atomic.Int32
	done  chan struct{}
}

func (r *resetThenLate) Create(ctx context.Context, req provider.CreateRequest) provider.Result {
	if r.calls.Add(1) > 1 {
		return r.Provider.Create(ctx, req)
	}
	go func() {
		defer close(r.done)
		time.Sleep(r.late)
		r.Provider.Create(context.WithoutCancel(ctx), req)
	}()
	cfg := r.Provider.(*provider.HTTP).Config()
	now := time.Now()
	return provider.Result{Class: provider.ClassUnknown, Sent: true, Error: "connection reset",
		StartedAt: now, EndedAt: now, Account: cfg.Account, Environment: cfg.Environment}
}

// The first create's connection is reset at once, but the supplier may
// still act on it until the call's timeout; the resend is refused (429).
// The refused resend ends sooner than the first call may still land, so
// the lookup that follows (the budget is spent) must wait for the first
// call's deadline plus the visibility lag: an earlier "absent" would be
// believed while the first order is still on its way.
func TestRefusedResendDoesNotMakeAnAbsentLookupBelievableBeforeTheFirstCallsDeadline(t *testing.T) {
	t.Parallel()
	const timeout, late = 3 * time.Second, 2 * time.Second
	var reset *resetThenLate
	p := testpipeline.New(t, testpipeline.Options{
		Idempotency: true, LookupLag: 300 * time.Millisecond, Mode: mocksupplier.Ignore, MaxAttempts: 2,
		Timeout: timeout, Lease: 5 * time.Second,
		Providers: func(real provider.Provider) provider.Provider {
			reset = &resetThenLate{Provider: real, late: late, done: make(chan struct{})}
			return reset
		},
	})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.RateLimit429, RetryAfterS: 1})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	<-reset.done
	if p.Orders(op) != 1 || done.ProviderReference == nil {
		t.Errorf("orders %d, reference %v; want 1 and the order's; history:\n%s", p.Orders(op), done.ProviderReference, p.History(op))
	}
	if kinds := strings.Join(p.Kinds(op), ","); strings.Contains(kinds, string(ledger.EventLookupAbsentConfirmed)) {
		t.Errorf("events %s: absence believed while the first call could still land", kinds)
	}
}

// A resend refused at once (401) ends long before the first call, whose
// answer was lost, may still land: the review item keeps the first call's
// deadline as the last send, so lookups and replays wait visibility_lag
// after it.
func TestRefusedResendKeepsTheFirstCallsDeadlineAsTheLastSend(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: time.Second, Mode: mocksupplier.Honour})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit}, mocksupplier.Fault{Kind: mocksupplier.Unauthorized401})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	got := p.WaitStatus(op, ledger.StatusReview, settle)
	if got.FirstSentAt == nil || got.LastSentAt == nil || got.LastSentAt.Sub(*got.FirstSentAt) < p.Opts.Timeout {
		t.Errorf("first send %v, last send %v: want the last send at least the timeout %s after the first; history:\n%s",
			got.FirstSentAt, got.LastSentAt, p.Opts.Timeout, p.History(op))
	}
}
