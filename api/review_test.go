package api_test

import (
	"fmt"
	"reflect"
	"testing"
)

// TestResolveAnswersTheOperationViewWithItsCompensation: the answer of a
// resolve is the operation exactly as GET /v1/operations/{id} shows it (as
// retry's is), and a compensation the resolution created is an extra
// top-level field.
func TestResolveAnswersTheOperationViewWithItsCompensation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approval := f.approve(t, `{"sku":"A-1"}`, `,"max_uses":2`)
	r := f.do(t, "POST", "/v1/approvals", f.approver,
		[]byte(fmt.Sprintf(`{"action":%q,"params":{"order":"ord_1"},"ttl_seconds":600,"policy_version":"p1"}`, cancelAction)))
	if r.status != 201 {
		t.Fatalf("approve compensation: %d %s", r.status, r.raw)
	}
	cancelApproval := r.str("id")

	tests := []struct {
		name, key, resolve string
		status             string
		compensation       bool
	}{
		{"cancelled, nothing linked", "po-1", `{"outcome":"cancelled","note":"no longer needed"}`, "cancelled", false},
		{"succeeded with a compensation", "po-2", fmt.Sprintf(`{"outcome":"succeeded","provider_reference":"ord_1","note":"seen in the portal",`+
			`"compensation":{"action":%q,"key":"undo-po-2","params":{"order":"ord_1"},"approval_id":%q}}`, cancelAction, cancelApproval), "succeeded", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			op := f.do(t, "POST", "/v1/operations", f.agent, opBody(tt.key, `{"sku":"A-1"}`, approval))
			if op.status != 201 {
				t.Fatalf("create: %d %s", op.status, op.raw)
			}
			id := op.str("id")
			res := f.do(t, "POST", "/v1/operations/"+id+"/resolve", f.operator, []byte(tt.resolve))
			if res.status != 200 || res.str("id") != id || res.str("status") != tt.status {
				t.Fatalf("resolve: %d %s, want 200 with the operation %s %s at the top level", res.status, res.raw, id, tt.status)
			}
			comp, hasComp := res.body["compensation"].(map[string]any)
			if hasComp != tt.compensation {
				t.Errorf("compensation present = %v, want %v (%s)", hasComp, tt.compensation, res.raw)
			}
			if hasComp && (comp["action"] != cancelAction || comp["status"] != "queued" || comp["id"] == id) {
				t.Errorf("compensation = %v, want a new queued %s operation", comp, cancelAction)
			}
			delete(res.body, "compensation")
			if got := f.do(t, "GET", "/v1/operations/"+id, f.operator, nil); !reflect.DeepEqual(res.body, got.body) {
				t.Errorf("resolve answered\n%v\nGET answers\n%v", res.body, got.body)
			}
		})
	}
}
