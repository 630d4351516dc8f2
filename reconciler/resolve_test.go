package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/reconciler"
)

// TestResolveAndItsCompensationCommitTogetherOrNotAtAll: a resolution whose
// own write fails leaves no compensation behind (none is stored, none is
// sent, its approval keeps its use), and a compensation that is refused
// leaves the operation unresolved. Before, the compensation was enqueued
// (and sent) in its own transaction before the resolution was written.
func TestResolveAndItsCompensationCommitTogetherOrNotAtAll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1})
	operator, err := p.Tokens.Authenticate(ctx, p.Operator)
	if err != nil {
		t.Fatal(err)
	}
	// The original operation waits (acme is paused); compensations go to
	// beta, whose supplier counts them.
	if err := p.Store.PauseDispatch(ctx, ledger.WholeTenant(p.TenantID), "acme", "", "test"); err != nil {
		t.Fatal(err)
	}
	p.Start(1)
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	compParams := `{"order":"ord_1"}`
	compApproval, err := p.Store.CreateApproval(ctx, ledger.NewApproval{
		TenantID: p.TenantID, ApproverTokenID: approverID(t, p), Action: testpipeline.OtherAction,
		Params: []byte(compParams), PolicyVersion: "p1", ExpiresAt: p.Clock.Now().Add(time.Hour), MaxUses: 2,
		Target: &testpipeline.DefaultTarget,
	})
	if err != nil {
		t.Fatal(err)
	}
	resolve := func(key, note string, approval ledger.Approval) error {
		_, _, err := p.Reconciler.Resolve(ctx, ledger.WholeTenant(p.TenantID), operator.TokenID, operator.Actor(), op.ID, reconciler.Resolution{
			Outcome: "cancelled", Note: note,
			Compensation: &reconciler.Compensation{Action: testpipeline.OtherAction, Key: key, Params: []byte(compParams), ApprovalID: approval.ID},
		})
		return err
	}

	// The resolution's write fails (Postgres refuses U+0000 in its note)
	// after the compensation was enqueued.
	if err := resolve("undo-1", "bad\x00note", compApproval); err == nil {
		t.Fatal("resolve with an unstorable note succeeded")
	}
	if _, err := p.Store.GetByKey(ctx, ledger.WholeTenant(p.TenantID), testpipeline.OtherAction, "undo-1"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("compensation of a failed resolve: err %v, want ErrNotFound (it must not exist)", err)
	}
	// A refused compensation (another approval's params) leaves the
	// operation as it was.
	wrong := p.Approve(`{"sku":"other"}`, time.Hour)
	if err := resolve("undo-2", "ok", wrong); err == nil {
		t.Fatal("resolve with a mismatched compensation approval succeeded")
	}
	if got := p.Get(op); got.Status != ledger.StatusQueued {
		t.Errorf("operation is %s after a refused compensation, want queued", got.Status)
	}

	// The same resolution done right: both commit, and the compensation
	// is sent once.
	if err := resolve("undo-3", "fine", compApproval); err != nil {
		t.Fatal(err)
	}
	comp, err := p.Store.GetByKey(ctx, ledger.WholeTenant(p.TenantID), testpipeline.OtherAction, "undo-3")
	if err != nil {
		t.Fatal(err)
	}
	p.WaitStatus(comp, ledger.StatusSucceeded, settle)
	if got := p.Get(op); got.Status != ledger.StatusCancelled {
		t.Errorf("operation is %s, want cancelled", got.Status)
	}
	if n := p.Other.TotalOrders(); n != 1 {
		t.Errorf("compensation orders at the supplier: %d, want 1", n)
	}
	var uses int
	if err := p.Pool.QueryRow(ctx, `SELECT uses FROM approvals WHERE id = $1`, compApproval.ID).Scan(&uses); err != nil {
		t.Fatal(err)
	}
	if uses != 1 {
		t.Errorf("compensation approval uses: %d, want 1 (the failed resolve took none)", uses)
	}
}

// approverID is the id of the pipeline's approver token.
func approverID(t *testing.T, p *testpipeline.Pipeline) uuid.UUID {
	t.Helper()
	pr, err := p.Tokens.Authenticate(context.Background(), p.Approver)
	if err != nil {
		t.Fatal(fmt.Errorf("approver: %w", err))
	}
	return pr.TokenID
}
