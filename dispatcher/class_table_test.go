package dispatcher_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// The first create times out while the supplier still works on it (the
// order is committed only after the client gave up); resends under the same key find
// the key in progress (409) until the stored answer is ready, and the
// operation stays unknown meanwhile. The replayed answer settles it: one
// order.
func TestConflictWhileTheKeyIsInProgressStaysUnknownUntilTheResendIsAnswered(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: -1, Mode: mocksupplier.Honour, MaxAttempts: 20})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.CommitLate, MS: 2500})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	history := p.History(op)
	if p.Orders(op) != 1 || done.ProviderReference == nil {
		t.Errorf("orders %d, reference %v; want 1 and the order's; history:\n%s", p.Orders(op), done.ProviderReference, history)
	}
	if !strings.Contains(history, `"http_status": 409`) || strings.Contains(history, "retry_wait") || strings.Contains(history, "failed") {
		t.Errorf("want a 409 kept unknown (never retry_wait or failed); history:\n%s", history)
	}
}

// A 500 after the order was committed is stored under the key, so every
// resend inside retention gets the same 500: the resends stop when the
// retry budget is spent, and the lookup settles the operation with the one
// order.
func TestRepeated500UnderTheKeyIsSettledByLookupOnceResendsAreSpent(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 200 * time.Millisecond, Mode: mocksupplier.Honour, MaxAttempts: 3})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.Error500AfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	if p.Orders(op) != 1 || p.Creates(op) != 3 || done.ProviderReference == nil {
		t.Errorf("orders %d, create requests %d, reference %v; want 1, 3 (max_attempts) and the order's; history:\n%s",
			p.Orders(op), p.Creates(op), done.ProviderReference, p.History(op))
	}
	if kinds := strings.Join(p.Kinds(op), ","); !strings.HasSuffix(kinds, "lookup_found") {
		t.Errorf("events %s: want the lookup to settle it", kinds)
	}
}

// A supplier that refuses connections was provably sent nothing: each
// attempt is retry_wait with the same key, and when the budget is spent the
// operation goes to a person with reason retries_exhausted.
func TestConnectionRefusedIsRetriedThenRetriesExhausted(t *testing.T) {
	t.Parallel()
	closed := refusingURL(t)
	p := testpipeline.New(t, testpipeline.Options{
		Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour, MaxAttempts: 3,
		Providers: func(real provider.Provider) provider.Provider {
			cfg := *real.(*provider.HTTP).Config()
			cfg.BaseURL = closed
			return provider.NewHTTP(&cfg, provider.HTTPOptions{})
		},
	})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusReview, settle)
	if *done.ReviewReason != ledger.ReasonRetriesExhausted || done.Attempts != 3 || done.FirstSentAt != nil {
		t.Errorf("reason %s, attempts %d, first send %v; want retries_exhausted after 3 attempts, none sent; history:\n%s",
			*done.ReviewReason, done.Attempts, done.FirstSentAt, p.History(op))
	}
	if history := p.History(op); strings.Count(history, "dispatching→retry_wait") != 2 || strings.Contains(history, "→unknown") {
		t.Errorf("want two retry_wait and no unknown; history:\n%s", history)
	}
}

// Without a lookup, resends under the key that keep getting a stored 500
// end when the budget is spent: the operation goes to a person with reason
// retries_exhausted, with the one order the first attempt made.
func TestRepeated500UnderTheKeyWithoutLookupIsRetriesExhausted(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: -1, Mode: mocksupplier.Honour, MaxAttempts: 3})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.Error500AfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusReview, settle)
	if *done.ReviewReason != ledger.ReasonRetriesExhausted || p.Orders(op) != 1 || p.Creates(op) != 3 {
		t.Errorf("reason %s, orders %d, create requests %d; want retries_exhausted, 1 and 3; history:\n%s",
			*done.ReviewReason, p.Orders(op), p.Creates(op), p.History(op))
	}
}

// refusingURL is the URL of a local port that refuses every connection
// until t ends. A socket bound to the port that never listens holds it:
// the port of a closed listener is free, and a parallel test's listener
// took one once and answered the requests meant to be refused with 404.
func refusingURL(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
