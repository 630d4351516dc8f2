package dispatcher_test

import (
	"net/http"
	"testing"

	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/mocksupplier"
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
