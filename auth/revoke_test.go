package auth_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// TestRevokingAnApproverTokenRevokesItsApprovalsAndHoldsTheirUnsentWork:
// `actledger token revoke` of an approver's token (auth.Tokens.Revoke)
// takes its decisions with it: an operation queued under an approval it
// granted is held and never reaches the supplier, the approval authorises
// no new operation (403 approval_revoked), and the dispatcher's check
// before any call finds it revoked (so an unknown one is never resent).
// Another approver's work goes on.
func TestRevokingAnApproverTokenRevokesItsApprovalsAndHoldsTheirUnsentWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1})
	tokens := p.CLITokens()
	revokedApprover, err := tokens.Authenticate(ctx, p.Approver)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tokens.Create(ctx, p.Tenant, auth.RoleApprover, "other-approver")
	if err != nil {
		t.Fatal(err)
	}
	approve := func(by uuid.UUID, params string) ledger.Approval {
		a, err := p.Store.CreateApproval(ctx, ledger.NewApproval{
			TenantID: p.TenantID, ApproverTokenID: by, Action: testpipeline.Action, Params: []byte(params),
			PolicyVersion: "p1", ExpiresAt: p.Clock.Now().Add(time.Hour), MaxUses: 2,
			Target: &testpipeline.DefaultTarget,
		})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	enqueue := func(key, params string, a ledger.Approval) (int, map[string]any) {
		return p.Do("POST", "/v1/operations", p.Agent,
			fmt.Sprintf(`{"action":%q,"key":%q,"params":%s,"approval_id":%q}`, testpipeline.Action, key, params, a.ID))
	}
	// Work waits, paused, while the approver's token is revoked.
	if err := p.Store.PauseDispatch(ctx, ledger.WholeTenant(p.TenantID), "", "", "test"); err != nil {
		t.Fatal(err)
	}
	p.Start(1)
	granted := approve(revokedApprover.TokenID, `{"sku":"A-1"}`)
	if status, out := enqueue("po-revoked", `{"sku":"A-1"}`, granted); status != http.StatusCreated {
		t.Fatalf("enqueue: %d %v", status, out)
	}
	control := approve(other.ID, `{"sku":"B-1"}`)
	if status, out := enqueue("po-control", `{"sku":"B-1"}`, control); status != http.StatusCreated {
		t.Fatalf("enqueue control: %d %v", status, out)
	}
	held, err := tokens.Revoke(ctx, revokedApprover.TokenID.String(), "cli:token-revoke")
	if err != nil {
		t.Fatal(err)
	}
	op, err := p.Store.GetByKey(ctx, ledger.WholeTenant(p.TenantID), testpipeline.Action, "po-revoked")
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || held[0].ID != op.ID || held[0].Status != ledger.StatusHeld {
		t.Errorf("held %v, want only po-revoked, held", held)
	}
	if lapse, err := p.Store.CheckLapse(ctx, op.ID); err != nil || lapse != ledger.LapseApprovalRevoked {
		t.Errorf("lapse of po-revoked: %q (%v), want %q", lapse, err, ledger.LapseApprovalRevoked)
	}
	if status, out := enqueue("po-new", `{"sku":"A-1"}`, granted); status != http.StatusForbidden {
		t.Errorf("new operation under the revoked approver's approval: %d %v, want 403", status, out)
	} else if e, _ := out["error"].(map[string]any); e["code"] != "approval_revoked" {
		t.Errorf("new operation under the revoked approver's approval: %v, want approval_revoked", out)
	}

	// Resume: the control operation is sent; the held one never is.
	if status, out := p.Do("POST", "/v1/dispatch/resume", p.Operator, `{}`); status != http.StatusOK {
		t.Fatalf("resume: %d %v", status, out)
	}
	ctl, err := p.Store.GetByKey(ctx, ledger.WholeTenant(p.TenantID), testpipeline.Action, "po-control")
	if err != nil {
		t.Fatal(err)
	}
	p.WaitStatus(ctl, ledger.StatusSucceeded, 20*time.Second)
	if got := p.Get(op); got.Status != ledger.StatusHeld {
		t.Errorf("po-revoked is %s, want held", got.Status)
	}
	if n, total := p.Orders(op), p.Supplier.TotalOrders(); n != 0 || total != 1 {
		t.Errorf("orders for po-revoked %d, in all %d; want 0 and 1 (the control)", n, total)
	}
}
