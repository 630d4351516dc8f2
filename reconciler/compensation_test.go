package reconciler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// An operator settles an order as succeeded and asks for its
// compensation (a ticket that undoes it); the supplier of the
// compensation refuses it. The failure is not silent: the original order
// goes to review compensation_failed, its event naming the compensation,
// and the compensation stays failed.
func TestFailedCompensationOpensAReviewOnTheOriginal(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusReview, 15*time.Second)

	p.Other.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.Reject422})
	undo := p.ApproveAction(testpipeline.OtherAction, `{"order":"ord_1"}`, time.Hour)
	status, out := p.Do("POST", "/v1/operations/"+op.ID.String()+"/resolve", p.Operator, fmt.Sprintf(
		`{"outcome":"succeeded","provider_reference":"ord_1","note":"seen in the portal","compensation":{"action":%q,"key":"undo-po-1","params":{"order":"ord_1"},"approval_id":%q}}`,
		testpipeline.OtherAction, undo.ID))
	if status != 200 {
		t.Fatalf("resolve: %d %v", status, out)
	}
	comp := p.Operation(out["compensation"].(map[string]any))
	p.WaitStatus(comp, ledger.StatusFailed, 15*time.Second)
	done := p.WaitStatus(op, ledger.StatusReview, 15*time.Second)
	if done.ReviewReason == nil || *done.ReviewReason != ledger.ReasonCompensationFailed {
		t.Fatalf("original is in review for %v, want compensation_failed; history:\n%s", done.ReviewReason, p.History(op))
	}
	if history := p.History(op); !strings.Contains(history, comp.ID.String()) || !strings.Contains(history, "compensation_failed") {
		t.Errorf("the original's history does not name the compensation:\n%s", history)
	}
}
