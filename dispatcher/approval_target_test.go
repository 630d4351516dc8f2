package dispatcher_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// TestApprovalForAnotherAccountIsHeldBeforeAnyCall: an approval granted
// while the action pointed at account acct_test does not let a pipeline
// restarted with the providers file pointing the action at acct_other send
// anything: the operation is held (approval_mismatch) and neither supplier
// receives a request.
func TestApprovalForAnotherAccountIsHeldBeforeAnyCall(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, Mode: mocksupplier.Honour})
	op := p.Enqueue("po-1", `{"sku":"A-1","qty":3}`)
	a := approvalOf(t, p, op)
	if a.Account == nil || *a.Account != "acct_test" || a.Environment == nil || *a.Environment != "test" {
		t.Fatalf("approval bound to %v/%v, want acct_test/test", a.Account, a.Environment)
	}

	// The restart: the providers file now points the action elsewhere.
	p.Retarget("acme", ledger.Target{Account: "acct_other", Environment: "test"})
	p.Start(1)
	held := p.WaitStatus(op, ledger.StatusHeld, settle)
	events, err := p.Store.Events(context.Background(), ledger.WholeTenant(p.TenantID), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1]
	if last.Kind != ledger.EventKind(ledger.LapseApprovalMismatch) {
		t.Errorf("held by event %q, want %q; history:\n%s", last.Kind, ledger.LapseApprovalMismatch, p.History(op))
	}
	if !strings.Contains(string(last.Detail), `"account": "acct_other"`) || !strings.Contains(string(last.Detail), `"sent": false`) {
		t.Errorf("hold evidence %s: want the account it would have gone to and that nothing was sent", last.Detail)
	}
	if got := held.Summary(); !strings.Contains(got, "not the one its approval was granted for; nothing happened") {
		t.Errorf("summary %q: want it to say the approval was granted for another account and nothing happened", got)
	}
	if held.Attempts != 0 || held.FirstSentAt != nil {
		t.Errorf("held after %d attempts, first sent %v; want nothing sent", held.Attempts, held.FirstSentAt)
	}
	if got := p.Creates(op) + len(p.Other.CreateRequests(op.ExternalKey)); got != 0 {
		t.Errorf("create requests at the suppliers = %d, want 0", got)
	}
	if got := p.Orders(op) + p.Other.Orders(op.ExternalKey); got != 0 {
		t.Errorf("orders at the suppliers = %d, want 0", got)
	}
}

// TestApprovalOlderThanTheBindingMatchesAnyAccount: an approval granted
// before approvals recorded their account (schema 013: account NULL) is
// treated as matching, as it was before, so an upgrade does not hold the
// work in flight.
func TestApprovalOlderThanTheBindingMatchesAnyAccount(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, Mode: mocksupplier.Honour})
	op := p.Enqueue("po-1", `{"sku":"A-1","qty":3}`)
	if _, err := p.Pool.Exec(context.Background(),
		`UPDATE approvals SET account = NULL, environment = NULL WHERE id = $1`, op.ApprovalID); err != nil {
		t.Fatal(err)
	}
	p.Retarget("acme", ledger.Target{Account: "acct_other", Environment: "test"})
	p.Start(1)
	p.WaitStatus(op, ledger.StatusSucceeded, settle)
	if got := p.Orders(op); got != 1 {
		t.Errorf("supplier orders = %d, want 1", got)
	}
}

func approvalOf(t *testing.T, p *testpipeline.Pipeline, op ledger.Operation) ledger.Approval {
	t.Helper()
	var a ledger.Approval
	err := p.Pool.QueryRow(context.Background(), `SELECT account, environment FROM approvals WHERE id = $1`, op.ApprovalID).
		Scan(&a.Account, &a.Environment)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestApprovedProposalIsBoundToItsAccount: a person's approval of a
// proposal binds the account the action points at when they approve; a
// pipeline restarted with the action pointing elsewhere holds it, and
// no supplier sees a request.
func TestApprovedProposalIsBoundToItsAccount(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, Mode: mocksupplier.Honour})
	status, proposal := p.Do("POST", "/v1/operations", p.Agent,
		`{"action":"`+testpipeline.Action+`","key":"po-1","params":{"sku":"A-1","qty":3},"request_approval":true}`)
	if status != 202 {
		t.Fatalf("propose: %d %v", status, proposal)
	}
	id := proposal["id"].(string)
	status, approved := p.Do("POST", "/v1/operations/"+id+"/approve", p.Approver,
		`{"params_fingerprint":"`+proposal["params_fingerprint"].(string)+`"}`)
	if status != 200 || approved["status"] != string(ledger.StatusQueued) {
		t.Fatalf("approve: %d %v", status, approved)
	}
	op := p.Get(ledger.Operation{ID: uuid.MustParse(id)})
	if a := approvalOf(t, p, op); a.Account == nil || *a.Account != "acct_test" {
		t.Fatalf("the approval is bound to %v, want acct_test", a.Account)
	}

	p.Retarget("acme", ledger.Target{Account: "acct_other", Environment: "test"})
	p.Start(1)
	p.WaitStatus(op, ledger.StatusHeld, settle)
	if got := p.Creates(op) + len(p.Other.CreateRequests(op.ExternalKey)); got != 0 {
		t.Errorf("create requests at the suppliers = %d, want 0", got)
	}
}
