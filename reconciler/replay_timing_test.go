package reconciler_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/reconciler"
)

// resetThenLate is a provider whose first create sees its connection reset
// at once while the request goes on at the supplier, which acts on it
// after late (still inside the call's timeout).
type resetThenLate struct {
	provider.Provider
	late    time.Duration
	calls   atomic.Int32
	started chan time.Time
	done    chan struct{}
}

func (r *resetThenLate) Create(ctx context.Context, req provider.CreateRequest) provider.Result {
	if r.calls.Add(1) > 1 {
		return r.Provider.Create(ctx, req)
	}
	now := time.Now()
	r.started <- now
	go func() {
		defer close(r.done)
		time.Sleep(r.late)
		r.Provider.Create(context.WithoutCancel(ctx), req)
	}()
	cfg := r.Provider.(*provider.HTTP).Config()
	return provider.Result{Class: provider.ClassUnknown, Sent: true, Error: "connection reset",
		StartedAt: now, EndedAt: now, Account: cfg.Account, Environment: cfg.Environment}
}

// A replay's lookup answers with what the supplier saw when the request
// arrived, however late the answer comes back. Arriving before the first
// call's deadline plus the visibility lag, its "absent" is not believable,
// even if the answer only comes back after that moment: the order that
// first call makes lands after the lookup arrived.
func TestReplayJudgesAnAbsentLookupAsOfWhenItWasAsked(t *testing.T) {
	t.Parallel()
	const (
		timeout = 3 * time.Second
		lag     = time.Second
		late    = 2500 * time.Millisecond // the first order lands inside the call's timeout
		slow    = 2800 * time.Millisecond // the lookup's answer takes this long, inside its timeout
	)
	var reset *resetThenLate
	p := testpipeline.New(t, testpipeline.Options{
		Idempotency: true, LookupLag: lag, Mode: mocksupplier.Honour, Timeout: timeout, Lease: 5 * time.Second,
		Providers: func(real provider.Provider) provider.Provider {
			reset = &resetThenLate{Provider: real, late: late, started: make(chan time.Time, 1), done: make(chan struct{})}
			return reset
		},
	})
	// The resend is refused before its key is looked at: the operation
	// goes to a person, its first call's outcome unknown.
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.Unauthorized401})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	first := <-reset.started
	if got := *p.WaitStatus(op, ledger.StatusReview, settle).ReviewReason; got != ledger.ReasonRejectedAfterUnknown {
		t.Fatalf("review reason %s, want %s; history:\n%s", got, ledger.ReasonRejectedAfterUnknown, p.History(op))
	}
	announced(t, p)
	// Ask after the lookup's answer could come back past the believable
	// moment (the first call's deadline plus the lag), but before the
	// first order lands.
	if wait := time.Until(first.Add(timeout + lag - slow + 300*time.Millisecond)); wait > 0 {
		time.Sleep(wait)
	}
	if time.Since(first) >= late {
		t.Skipf("the machine was too slow to ask before the first order lands (%s after the first call)", time.Since(first))
	}
	p.Supplier.SetLookupDelay(slow)
	got := replay(t, p, `{}`)
	<-reset.done
	if p.Orders(op) != 1 {
		t.Fatalf("orders %d, want 1 (the first call's)", p.Orders(op))
	}
	if got.results["po-1"] == reconciler.ReplayAbsenceConfirmed {
		t.Errorf("replay %+v: absence confirmed by a lookup asked before it was believable, and the order exists; history:\n%s", got, p.History(op))
	}
}
