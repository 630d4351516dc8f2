package reconciler_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// TestACompensationTakesTheScopeOfTheOperationItCompensates: an operator
// of the whole tenant resolves supply-eu's operation with a compensation;
// the compensation is supply-eu's business, whoever resolved it: it has
// the original's scope, supply-eu's agent sees it and supply-us's does
// not (404). An operator of supply-eu resolving with an approval granted
// by an approver of supply-us gets approval_mismatch, as for a missing
// approval, and nothing is resolved.
func TestACompensationTakesTheScopeOfTheOperationItCompensates(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1})
	euAgent, usAgent := p.ScopedToken("supply-eu", auth.RoleAgent), p.ScopedToken("supply-us", auth.RoleAgent)
	euOperator, usApprover := p.ScopedToken("supply-eu", auth.RoleOperator), p.ScopedToken("supply-us", auth.RoleApprover)
	enqueue := func(key string) ledger.Operation {
		t.Helper()
		a := p.ApproveAction(testpipeline.OtherAction, `{"subject":"restock"}`, time.Hour)
		status, out := p.Do("POST", "/v1/operations", euAgent, fmt.Sprintf(`{"action":%q,"key":%q,"params":{"subject":"restock"},"approval_id":%q}`, testpipeline.OtherAction, key, a.ID))
		if status != http.StatusCreated {
			t.Fatalf("supply-eu enqueues %s: %d %v", key, status, out)
		}
		return p.Operation(out)
	}
	resolveBody := func(key, approval string) string {
		return fmt.Sprintf(`{"outcome":"cancelled","note":"order instead","compensation":{"action":%q,"key":%q,"params":{"sku":"A-1","qty":1},"approval_id":%q}}`,
			testpipeline.Action, key, approval)
	}

	original := enqueue("ticket-1")
	status, out := p.Do("POST", "/v1/operations/"+original.ID.String()+"/resolve", p.Operator, resolveBody("undo-1", p.Approve(`{"sku":"A-1","qty":1}`, time.Hour).ID.String()))
	comp, _ := out["compensation"].(map[string]any)
	if status != http.StatusOK || comp == nil || comp["scope"] != "supply-eu" {
		t.Fatalf("resolve with a compensation: %d %v, want 200 and a compensation of scope supply-eu", status, out)
	}
	path := fmt.Sprintf("/v1/operations/%s", comp["id"])
	if status, _ := p.Do("GET", path, euAgent, ""); status != http.StatusOK {
		t.Errorf("supply-eu reads the compensation: %d, want 200", status)
	}
	if status, _ := p.Do("GET", path, usAgent, ""); status != http.StatusNotFound {
		t.Errorf("supply-us reads the compensation: %d, want 404", status)
	}

	second := enqueue("ticket-2")
	status, out = p.Do("POST", "/v1/approvals", usApprover, fmt.Sprintf(`{"action":%q,"params":{"sku":"A-1","qty":1},"ttl_seconds":3600,"policy_version":"p1"}`, testpipeline.Action))
	if status != http.StatusCreated {
		t.Fatalf("supply-us's approval: %d %v", status, out)
	}
	status, out = p.Do("POST", "/v1/operations/"+second.ID.String()+"/resolve", euOperator, resolveBody("undo-2", fmt.Sprint(out["id"])))
	if e, _ := out["error"].(map[string]any); status != http.StatusForbidden || e["code"] != "approval_mismatch" {
		t.Errorf("supply-eu compensates under supply-us's approval: %d %v, want 403 approval_mismatch", status, out)
	}
	if got := p.Get(second); got.Status != second.Status || got.Version != second.Version {
		t.Errorf("the operation is %s v%d after a refused compensation, want it unresolved", got.Status, got.Version)
	}
}
