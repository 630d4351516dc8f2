package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// TestConsolePagesOfAScopeShowAndDecideItsOwnWorkOnly: signed in with a
// token of scope supply-us, the approval requests page lists none of
// supply-eu's proposals, the review queue none of its review items (nor
// the tenant's unmatched evidence, which is no scope's), supply-eu's
// operation page is the very page a missing id gets (404), and approving
// or resolving supply-eu's work is refused as not found and changes
// nothing. supply-eu's own pages show its work, and a person of the whole
// tenant sees both scopes'.
func TestConsolePagesOfAScopeShowAndDecideItsOwnWorkOnly(t *testing.T) {
	t.Parallel()
	p := setup(t)
	ctx := context.Background()
	euAgent := p.ScopedToken("supply-eu", auth.RoleAgent)
	status, out := p.Do("POST", "/v1/operations", euAgent, fmt.Sprintf(
		`{"action":%q,"key":"po-eu-proposal","params":{"sku":"A-1","qty":1},"request_approval":true,"reason":"EU restock"}`, testpipeline.Action))
	if status != http.StatusAccepted {
		t.Fatalf("supply-eu proposes: %d %v", status, out)
	}
	proposal := p.Operation(out)
	approval := p.Approve(`{"sku":"R-1"}`, time.Hour)
	status, out = p.Do("POST", "/v1/operations", euAgent, fmt.Sprintf(`{"action":%q,"key":"po-eu-review","params":{"sku":"R-1"},"approval_id":%q}`, testpipeline.Action, approval.ID))
	if status != http.StatusCreated {
		t.Fatalf("supply-eu enqueues: %d %v", status, out)
	}
	queued := p.Operation(out)
	review, err := p.Store.Transition(ctx, ledger.Change{
		ID: queued.ID, From: queued.Status, Version: queued.Version, To: ledger.StatusReview, Kind: "test_review", Actor: "test",
		Review: &ledger.Review{Reason: ledger.ReasonOutcomeUnknown, Owner: "supply-ops", Deadline: time.Now().Add(time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Store.RecordUnmatched(ctx, ledger.Unmatched{
		TenantID: &p.TenantID, Provider: "acme", Source: "webhook:evt-nobody", Reference: "ref-nobody",
		Status: ledger.EvidenceSucceeded, Owner: "supply-ops", Deadline: time.Now().Add(time.Hour),
	}, p.Tenant); err != nil {
		t.Fatal(err)
	}

	usApprover := signIn(t, p, p.ScopedToken("supply-us", auth.RoleApprover))
	usOperator := signIn(t, p, p.ScopedToken("supply-us", auth.RoleOperator))
	if res := usApprover.get("/console/approvals"); res.status != http.StatusOK || strings.Contains(res.body, proposal.ID.String()) || strings.Contains(res.body, "EU restock") {
		t.Errorf("supply-us's approval requests page: %d, lists supply-eu's proposal\n%s", res.status, res.body)
	}
	if res := usOperator.get("/console/review"); res.status != http.StatusOK || strings.Contains(res.body, review.ID.String()) || strings.Contains(res.body, "ref-nobody") {
		t.Errorf("supply-us's review queue: %d, lists supply-eu's item or the tenant's evidence\n%s", res.status, res.body)
	}
	theirs := usOperator.get("/console/operations/" + review.ID.String())
	missing := usOperator.get("/console/operations/" + uuid.NewString())
	if theirs.status != http.StatusNotFound || theirs.body != missing.body || strings.Contains(theirs.body, "po-eu-review") {
		t.Errorf("supply-eu's operation for supply-us: %d, a missing one: %d; want the same 404 page\n%s\n---\n%s", theirs.status, missing.status, theirs.body, missing.body)
	}
	if res := usApprover.post("/console/approvals/"+proposal.ID.String()+"/approve", url.Values{"params_fingerprint": {proposal.ParamsFingerprint}}); res.status != http.StatusNotFound {
		t.Errorf("supply-us approves supply-eu's proposal: %d, want 404", res.status)
	}
	if res := usOperator.post("/console/review", url.Values{"item": {"op:" + review.ID.String()}, "do": {"resolve_cancelled"}, "note": {"mine now"}}); res.status != http.StatusOK || !strings.Contains(res.body, "0 of 1") {
		t.Errorf("supply-us resolves supply-eu's item: %d, want it refused as not found\n%s", res.status, res.body)
	}
	if got := p.Get(proposal); got.Status != ledger.StatusAwaitingApproval {
		t.Errorf("the proposal is %s after supply-us's approve", got.Status)
	}
	if got := p.Get(review); got.Status != ledger.StatusReview || got.Version != review.Version {
		t.Errorf("the review item is %s v%d after supply-us's resolve", got.Status, got.Version)
	}

	euOperator := signIn(t, p, p.ScopedToken("supply-eu", auth.RoleOperator))
	if res := euOperator.get("/console/review"); !strings.Contains(res.body, review.ID.String()) || strings.Contains(res.body, "ref-nobody") {
		t.Errorf("supply-eu's review queue: want its item and not the tenant's evidence\n%s", res.body)
	}
	if res := euOperator.get("/console/operations/" + review.ID.String()); res.status != http.StatusOK || !strings.Contains(res.body, "po-eu-review") {
		t.Errorf("supply-eu's operation page: %d, want its operation", res.status)
	}
	if res := signIn(t, p, p.ScopedToken("supply-eu", auth.RoleApprover)).get("/console/approvals"); !strings.Contains(res.body, proposal.ID.String()) {
		t.Errorf("supply-eu's approval requests page lacks its proposal\n%s", res.body)
	}
	if res := signIn(t, p, p.Approver).get("/console/approvals"); !strings.Contains(res.body, proposal.ID.String()) {
		t.Errorf("the whole tenant's approval requests page lacks supply-eu's proposal\n%s", res.body)
	}
	if res := signIn(t, p, p.Operator).get("/console/review"); !strings.Contains(res.body, review.ID.String()) || !strings.Contains(res.body, "ref-nobody") {
		t.Errorf("the whole tenant's review queue lacks supply-eu's item or the evidence\n%s", res.body)
	}
}
