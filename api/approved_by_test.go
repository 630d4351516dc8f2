package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// TestEveryViewOfAnOperationNamesWhoApprovedIt: approved_by is the same in
// the answer that made or approved the operation, in GET
// /v1/operations/{id} and in the list, before and after dispatch, for each
// kind of decider: an approver token's standing approval, an approver
// token deciding a proposal, the action's policy. A waiting proposal names
// no one.
func TestEveryViewOfAnOperationNamesWhoApprovedIt(t *testing.T) {
	t.Parallel()
	const params = `{"sku":"A-1","qty":3}`
	tests := []struct {
		name     string
		contract string
		// decide makes the operation and returns the answer that carries
		// it with its approval.
		decide func(t *testing.T, p *testpipeline.Pipeline) map[string]any
		want   func(p *testpipeline.Pipeline) string
	}{
		{
			name: "standing approval of an approver token",
			decide: func(t *testing.T, p *testpipeline.Pipeline) map[string]any {
				a := p.Approve(params, time.Hour)
				status, out := p.Do("POST", "/v1/operations", p.Agent,
					fmt.Sprintf(`{"action":%q,"key":"po-1","params":%s,"approval_id":%q}`, testpipeline.Action, params, a.ID))
				if status != http.StatusCreated {
					t.Fatalf("enqueue = %d %v", status, out)
				}
				return out
			},
			want: func(p *testpipeline.Pipeline) string { return "approver:" + p.FactoryTenant.Approver.Name },
		},
		{
			name:     "proposal approved by an approver token",
			contract: `approval: {policy_version: "2026-11"}`,
			decide: func(t *testing.T, p *testpipeline.Pipeline) map[string]any {
				status, out := p.Propose("po-1", params)
				if status != http.StatusAccepted || out["approved_by"] != nil {
					t.Fatalf("propose = %d %v, want 202 approved by no one yet", status, out)
				}
				op := p.Operation(out)
				if status, out := p.Do("GET", "/v1/operations/"+op.ID.String(), p.Agent, ""); status != http.StatusOK || out["approved_by"] != nil {
					t.Fatalf("GET a waiting proposal = %d %v, want approved_by null", status, out)
				}
				status, out = approve(p, p.Approver, op.ID, op.ParamsFingerprint)
				if status != http.StatusOK {
					t.Fatalf("approve = %d %v", status, out)
				}
				return out
			},
			want: func(p *testpipeline.Pipeline) string { return "approver:" + p.FactoryTenant.Approver.Name },
		},
		{
			name:     "the action's policy",
			contract: policy,
			decide: func(t *testing.T, p *testpipeline.Pipeline) map[string]any {
				status, out := p.Propose("po-1", params)
				if status != http.StatusCreated {
					t.Fatalf("propose = %d %v, want 201 approved by the policy", status, out)
				}
				return out
			},
			want: func(*testpipeline.Pipeline) string { return "policy:2026-11" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := testpipeline.New(t, testpipeline.Options{ActionContract: tt.contract})
			p.Start(1)
			want := tt.want(p)
			out := tt.decide(t, p)
			if out["approved_by"] != want {
				t.Errorf("the deciding answer's approved_by = %v, want %s", out["approved_by"], want)
			}
			op := p.Operation(out)
			p.WaitStatus(op, ledger.StatusSucceeded, 10*time.Second)
			if got := p.Orders(op); got != 1 {
				t.Fatalf("supplier has %d orders, want 1", got)
			}
			for _, token := range []string{p.Agent, p.Approver, p.Operator} {
				if status, got := p.Do("GET", "/v1/operations/"+op.ID.String(), token, ""); status != http.StatusOK || got["approved_by"] != want {
					t.Errorf("GET /v1/operations/{id} = %d approved_by %v, want %s", status, got["approved_by"], want)
				}
			}
			status, list := p.Do("GET", "/v1/operations", p.Agent, "")
			items, _ := list["operations"].([]any)
			if status != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["approved_by"] != want {
				t.Errorf("GET /v1/operations = %d %v, want the one operation approved by %s", status, list, want)
			}
		})
	}
}
