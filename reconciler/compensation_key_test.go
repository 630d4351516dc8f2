package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/action"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/reconciler"
)

// A compensation of an action with a business key is keyed by it, as an
// agent's request is (the operator's key is its client key): the agent
// asking for the same purchase order afterwards gets the compensation's
// operation, and the supplier one order. Params that give no key are
// refused and resolve nothing.
func TestCompensationIsKeyedByTheActionsBusinessKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, ActionContract: `key: '"po-" + string(params.purchase_order)'`})
	operator, err := p.Tokens.Authenticate(ctx, p.Operator)
	if err != nil {
		t.Fatal(err)
	}
	// The operation resolved waits at beta (paused); its compensation is
	// an order at acme.
	if err := p.Store.PauseDispatch(ctx, ledger.WholeTenant(p.TenantID), "beta", "", "test"); err != nil {
		t.Fatal(err)
	}
	p.Start(1)
	original := p.EnqueueAction(testpipeline.OtherAction, "ticket-1", `{"subject":"restock"}`)
	const params = `{"purchase_order":39,"sku":"A-1","qty":1}`
	resolve := func(params string) (*ledger.Operation, error) {
		_, comp, err := p.Reconciler.Resolve(ctx, ledger.WholeTenant(p.TenantID), operator.TokenID, operator.Actor(), original.ID, reconciler.Resolution{
			Outcome: "cancelled", Note: "order instead",
			Compensation: &reconciler.Compensation{Action: testpipeline.Action, Key: "undo-1", Params: []byte(params), ApprovalID: p.Approve(params, time.Hour).ID},
		})
		return comp, err
	}

	var pe *action.ParamsError
	if _, err := resolve(`{"sku":"A-1","qty":1}`); !errors.As(err, &pe) || pe.Path != "/purchase_order" {
		t.Fatalf("compensation without the purchase order: err %v, want a *action.ParamsError naming /purchase_order", err)
	}
	if got := p.Get(original); got.Status != ledger.StatusQueued {
		t.Fatalf("operation is %s after a refused compensation, want queued", got.Status)
	}

	comp, err := resolve(params)
	if err != nil {
		t.Fatal(err)
	}
	if comp.Key != "po-39" || comp.ClientKey == nil || *comp.ClientKey != "undo-1" {
		t.Fatalf("compensation keyed %q with client key %v, want po-39 and undo-1", comp.Key, comp.ClientKey)
	}
	p.WaitStatus(*comp, ledger.StatusSucceeded, settle)

	body := fmt.Sprintf(`{"action":%q,"key":"call-9","params":%s,"approval_id":%q}`, testpipeline.Action, params, p.Approve(params, time.Hour).ID)
	status, out := p.Do("POST", "/v1/operations", p.Agent, body)
	if status != http.StatusOK || out["id"] != comp.ID.String() {
		t.Errorf("the agent's request for purchase order 39 = %d %v, want 200 with the compensation %s", status, out, comp.ID)
	}
	p.Settled(settle)
	if n := p.Supplier.TotalOrders(); n != 1 {
		t.Errorf("acme has %d orders, want 1", n)
	}
}

// A person signed in with the identity provider has no token: the
// compensation they resolve with is requested under the token that
// requested the operation it compensates, is sent once, and its events
// name the person.
func TestAPersonsCompensationIsRequestedUnderTheCompensatedOperationsToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1})
	if err := p.Store.PauseDispatch(ctx, ledger.WholeTenant(p.TenantID), "beta", "", "test"); err != nil {
		t.Fatal(err)
	}
	p.Start(1)
	original := p.EnqueueAction(testpipeline.OtherAction, "ticket-2", `{"subject":"restock"}`)
	const params = `{"sku":"A-1","qty":1}`
	const ann = "person:ann@acme.example"
	_, comp, err := p.Reconciler.Resolve(ctx, ledger.WholeTenant(p.TenantID), uuid.Nil, ann, original.ID, reconciler.Resolution{
		Outcome: "cancelled", Note: "order instead",
		Compensation: &reconciler.Compensation{Action: testpipeline.Action, Key: "undo-2", Params: []byte(params), ApprovalID: p.Approve(params, time.Hour).ID},
	})
	if err != nil {
		t.Fatalf("a person's resolution with a compensation: %v", err)
	}
	if comp.RequestedBy != original.RequestedBy {
		t.Errorf("the compensation is requested by %s, want the compensated operation's token %s", comp.RequestedBy, original.RequestedBy)
	}
	p.WaitStatus(*comp, ledger.StatusSucceeded, settle)
	if n := p.Supplier.TotalOrders(); n != 1 {
		t.Errorf("acme has %d orders, want 1", n)
	}
	events, err := p.Store.Events(ctx, ledger.WholeTenant(p.TenantID), comp.ID)
	if err != nil {
		t.Fatal(err)
	}
	var linked bool
	for _, e := range events {
		if e.Kind == ledger.EventCompensationFor {
			linked = e.Actor == ann
		}
	}
	if !linked {
		t.Errorf("the compensation's compensation_for event does not name %s:\n%s", ann, p.History(*comp))
	}
}
