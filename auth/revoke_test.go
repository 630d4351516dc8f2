package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
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

// TestRevokingAnApproverWhileItDecidesNeverLeavesAStandingApproval: a
// person's decision whose request was authenticated, and the revocation of
// that person's token, happen at the same moment. Whichever commits
// first, no approval of the revoked token is left standing: either the
// decision is refused (ErrApproverRevoked, the proposal still awaits a
// decision) or its approval is revoked with the others and the operation
// it queued is held. Both kinds of decision race: approving a proposal
// and POST /v1/approvals. Before, an approval committed after the
// revocation's statement that revokes the approver's approvals stood, and
// one decided after the revocation (authenticated just before it) was
// granted outright.
func TestRevokingAnApproverWhileItDecidesNeverLeavesAStandingApproval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := testpipeline.New(t, testpipeline.Options{})
	tokens := p.CLITokens()
	agent, err := tokens.Authenticate(ctx, p.Agent)
	if err != nil {
		t.Fatal(err)
	}
	standing := func(approval uuid.UUID) bool {
		t.Helper()
		var revoked *time.Time
		if err := p.Pool.QueryRow(ctx, `SELECT revoked_at FROM approvals WHERE id = $1`, approval).Scan(&revoked); err != nil {
			t.Fatal(err)
		}
		return revoked == nil
	}
	race := func(t *testing.T, round int, revokeFirst bool) {
		created, err := tokens.Create(ctx, p.Tenant, auth.RoleApprover, fmt.Sprintf("racing-approver-%v-%d", revokeFirst, round))
		if err != nil {
			t.Fatal(err)
		}
		// The approver's requests were authenticated before the
		// revocation: the principal is in hand.
		approver, err := tokens.Authenticate(ctx, created.Secret)
		if err != nil {
			t.Fatal(err)
		}
		params := fmt.Sprintf(`{"sku":"A-1","qty":%d}`, round+1)
		proposal, _, err := p.Store.Propose(ctx, ledger.ProposeRequest{TenantID: p.TenantID, TokenID: agent.TokenID, Actor: agent.Actor(),
			Action: testpipeline.Action, Key: fmt.Sprintf("po-race-%v-%d", revokeFirst, round), Provider: "acme",
			Params: []byte(params), RequestTTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		revoke := func() {
			if _, err := tokens.Revoke(ctx, created.Name, "test"); err != nil {
				t.Error(err)
			}
		}
		var (
			approved ledger.Operation
			grant    ledger.Approval
			errs     [2]error
			wg       sync.WaitGroup
		)
		decide := func() {
			approved, _, errs[0] = p.Store.Approve(ctx, ledger.WholeTenant(p.TenantID), proposal.ID, func(op ledger.Operation) ledger.Decision {
				return ledger.Decision{ApproverTokenID: approver.TokenID, Approver: approver.Actor(), Fingerprint: op.ParamsFingerprint,
					PolicyVersion: "p1", TTL: time.Hour, Target: &testpipeline.DefaultTarget}
			})
			grant, errs[1] = p.Store.CreateApproval(ctx, ledger.NewApproval{TenantID: p.TenantID, ApproverTokenID: approver.TokenID,
				Action: testpipeline.Action, Params: []byte(params), PolicyVersion: "p1", ExpiresAt: time.Now().Add(time.Hour),
				Target: &testpipeline.DefaultTarget})
		}
		if revokeFirst {
			revoke()
			decide()
		} else {
			wg.Add(2)
			go func() { defer wg.Done(); revoke() }()
			go func() { defer wg.Done(); decide() }()
			wg.Wait()
		}
		switch {
		case errs[0] == nil:
			if standing(approved.ApprovalID) {
				t.Errorf("round %d: the proposal's approval %s of the revoked approver stands", round, approved.ApprovalID)
			}
			if got := p.Get(proposal); got.Status != ledger.StatusHeld {
				t.Errorf("round %d: the approved proposal is %s, want held", round, got.Status)
			}
		case errors.Is(errs[0], ledger.ErrApproverRevoked):
			if got := p.Get(proposal); got.Status != ledger.StatusAwaitingApproval {
				t.Errorf("round %d: a refused decision left the proposal %s, want awaiting_approval", round, got.Status)
			}
		default:
			t.Errorf("round %d: approve: %v", round, errs[0])
		}
		switch {
		case errs[1] == nil:
			if standing(grant.ID) {
				t.Errorf("round %d: the approval %s of the revoked approver stands", round, grant.ID)
			}
		case !errors.Is(errs[1], ledger.ErrApproverRevoked):
			t.Errorf("round %d: create approval: %v", round, errs[1])
		}
	}
	t.Run("revoked just before the decision", func(t *testing.T) { race(t, 0, true) })
	t.Run("at the same moment", func(t *testing.T) {
		for round := range 20 {
			race(t, round, false)
		}
	})
}
