package console_test

import (
	"context"
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

func TestOtherTenantsObjectsAnswerLikeMissingOnes(t *testing.T) {
	t.Parallel()
	p := setup(t)
	mine := inReview(t, p, "po-mine", ledger.ReasonOutcomeUnknown, "ops")
	proposal := propose(t, p, "po-prop", `{"sku":"A-1","qty":1}`)
	otherOperator := signIn(t, p, p.TokenFor("Other Corp.", auth.RoleOperator))
	otherApprover := signIn(t, p, p.TokenFor("Other Corp.", auth.RoleApprover))

	theirs := otherOperator.get("/console/operations/" + mine.ID.String())
	missing := otherOperator.get("/console/operations/" + uuid.NewString())
	if theirs.status != http.StatusNotFound || missing.status != http.StatusNotFound || theirs.body != missing.body {
		t.Errorf("another tenant's operation: %d, a missing one: %d; want the same 404 page\n%s\n---\n%s", theirs.status, missing.status, theirs.body, missing.body)
	}
	if strings.Contains(theirs.body, "po-mine") {
		t.Errorf("the not-found page shows the other tenant's key")
	}
	if res := otherOperator.get("/console/review"); strings.Contains(res.body, mine.ID.String()) {
		t.Errorf("another tenant's review queue lists %s", mine.ID)
	}
	if res := otherApprover.get("/console/approvals"); strings.Contains(res.body, proposal.ID.String()) {
		t.Errorf("another tenant's approval requests list %s", proposal.ID)
	}
	res := otherApprover.post("/console/approvals/"+proposal.ID.String()+"/approve", url.Values{"params_fingerprint": {proposal.ParamsFingerprint}})
	if res.status != http.StatusNotFound {
		t.Errorf("another tenant approves: %d, want 404", res.status)
	}
	res = otherOperator.post("/console/review", url.Values{"item": {"op:" + mine.ID.String()}, "do": {"resolve_cancelled"}, "note": {"mine now"}})
	if res.status != http.StatusOK || !strings.Contains(res.body, "0 of 1") || !strings.Contains(res.body, "There is nothing here") {
		t.Errorf("another tenant resolves: %d, want its item refused as not found\n%s", res.status, res.body)
	}
	if got := p.Get(proposal); got.Status != ledger.StatusAwaitingApproval {
		t.Errorf("the proposal is %s after another tenant's approve", got.Status)
	}
	if got := p.Get(mine); got.Status != ledger.StatusReview {
		t.Errorf("the review item is %s after another tenant's resolve", got.Status)
	}
}

func TestReviewQueueShowsWhatIsKnownAndFilters(t *testing.T) {
	t.Parallel()
	p := setup(t)
	a := inReview(t, p, "po-a", ledger.ReasonOutcomeUnknown, "ops-eu")
	b := inReview(t, p, "po-b<script>", ledger.ReasonRetriesExhausted, "ops-us")
	s := signIn(t, p, p.Operator)
	res := s.get("/console/review")
	if res.status != http.StatusOK {
		t.Fatalf("review: %d", res.status)
	}
	for _, want := range []string{a.ID.String(), b.ID.String(), "outcome_unknown", "retries_exhausted", "ops-eu", "ops-us",
		"po-b&lt;script&gt;", "approval_valid", "external_key", a.ExternalKey, `class="yes"`} {
		if !strings.Contains(res.body, want) {
			t.Errorf("the queue does not show %q", want)
		}
	}
	if strings.Contains(res.body, "po-b<script>") {
		t.Errorf("the queue holds a key unescaped")
	}
	for _, tt := range []struct {
		query     string
		has, hasn string
	}{
		{"?reason=outcome_unknown", a.ID.String(), b.ID.String()},
		{"?owner=ops-us", b.ID.String(), a.ID.String()},
		{"?reason=outcome_unknown&owner=ops-us", "with this filter", a.ID.String()},
	} {
		res := s.get("/console/review" + tt.query)
		if !strings.Contains(res.body, tt.has) || strings.Contains(res.body, tt.hasn) {
			t.Errorf("%s: want %q shown and %q not", tt.query, tt.has, tt.hasn)
		}
	}
}

func TestReviewBatchShowsEachItemsResult(t *testing.T) {
	t.Parallel()
	p := setup(t)
	a := inReview(t, p, "po-a", ledger.ReasonOutcomeUnknown, "ops")
	b := inReview(t, p, "po-b", ledger.ReasonOutcomeUnknown, "ops")
	settled := inReview(t, p, "po-c", ledger.ReasonOutcomeUnknown, "ops")
	s := signIn(t, p, p.Operator)
	if res := s.post("/console/review", url.Values{"item": {"op:" + settled.ID.String()}, "do": {"resolve_failed"}, "note": {"checked"}}); res.status != http.StatusOK || !strings.Contains(res.body, "1 of 1") {
		t.Fatalf("resolve one: %d\n%s", res.status, res.body)
	}

	// A note is required; nothing changes without one.
	res := s.post("/console/review", url.Values{"item": {"op:" + a.ID.String(), "op:" + b.ID.String()}, "do": {"resolve_cancelled"}, "note": {" "}})
	if res.status != http.StatusBadRequest || !strings.Contains(res.body, "note is required") {
		t.Fatalf("batch without a note: %d\n%s", res.status, res.body)
	}
	if p.Get(a).Status != ledger.StatusReview || p.Get(b).Status != ledger.StatusReview {
		t.Fatal("a batch without a note changed something")
	}

	// One refusal (already settled; bogus) never hides the others' success.
	res = s.post("/console/review", url.Values{
		"item": {"op:" + a.ID.String(), "op:" + settled.ID.String(), "op:" + b.ID.String(), "op:not-an-id"},
		"do":   {"resolve_succeeded"}, "provider_reference": {"ord_<seen>"}, "note": {"seen in the portal"},
	})
	if res.status != http.StatusOK || !strings.Contains(res.body, "2 of 4") {
		t.Fatalf("batch: %d\n%s", res.status, res.body)
	}
	if strings.Count(res.body, "done: now succeeded") != 2 || !strings.Contains(res.body, "not_resolvable") || !strings.Contains(res.body, "There is nothing here") {
		t.Errorf("the results do not show each item's outcome:\n%s", res.body)
	}
	for _, op := range []ledger.Operation{a, b} {
		got := p.Get(op)
		if got.Status != ledger.StatusSucceeded || got.ProviderReference == nil || *got.ProviderReference != "ord_<seen>" {
			t.Errorf("%s is %s (%v), want succeeded with the reference", op.Key, got.Status, got.ProviderReference)
		}
	}
	if got := p.Get(settled); got.Status != ledger.StatusFailed {
		t.Errorf("the settled item is %s, want failed as first resolved", got.Status)
	}

	// Retry: a review item nothing may have reached is sent again.
	c := inReview(t, p, "po-retry", ledger.ReasonRetriesExhausted, "ops")
	res = s.post("/console/review", url.Values{"item": {"op:" + c.ID.String()}, "do": {"retry"}, "note": {"supplier fixed"}})
	if res.status != http.StatusOK || !strings.Contains(res.body, "done: now queued") {
		t.Fatalf("retry: %d\n%s", res.status, res.body)
	}
	if got := p.Get(c); got.Status != ledger.StatusQueued {
		t.Errorf("after retry the item is %s, want queued", got.Status)
	}
}

func TestOperationPageShowsTheTimelineAttemptsAndCompensation(t *testing.T) {
	t.Parallel()
	p := setup(t)
	// Made before the dispatcher runs, which would claim it while queued.
	review := inReview(t, p, "po-undo", ledger.ReasonEvidenceMismatch, "ops")
	p.Start(1)
	op := p.Enqueue("po-done", `{"sku":"A-1","qty":4}`)
	op = p.WaitStatus(op, ledger.StatusSucceeded, 15*time.Second)
	s := signIn(t, p, p.Operator)
	res := s.get("/console/operations/" + op.ID.String())
	if res.status != http.StatusOK {
		t.Fatalf("operation: %d", res.status)
	}
	for _, want := range []string{"succeeded", "attempt", "acct_test", "<td>test</td>", *op.ProviderReference, op.ExternalKey, "claimed"} {
		if !strings.Contains(res.body, want) {
			t.Errorf("the operation page does not show %q", want)
		}
	}
	if !regexp200(res.body) {
		t.Errorf("the operation page shows no HTTP status of the attempt")
	}

	// A resolution with a compensation links both ways.
	status, out := p.Do("POST", "/v1/approvals", p.Approver, `{"action":"`+testpipeline.OtherAction+`","params":{"undo":"po-undo"},"ttl_seconds":600,"policy_version":"p1"}`)
	if status != http.StatusCreated {
		t.Fatalf("approval: %d %v", status, out)
	}
	status, out = p.Do("POST", "/v1/operations/"+review.ID.String()+"/resolve", p.Operator,
		`{"outcome":"succeeded","provider_reference":"ord_9","note":"n","compensation":{"action":"`+testpipeline.OtherAction+`","key":"undo-1","params":{"undo":"po-undo"},"approval_id":"`+out["id"].(string)+`"}}`)
	if status != http.StatusOK {
		t.Fatalf("resolve: %d %v", status, out)
	}
	comp := out["compensation"].(map[string]any)["id"].(string)
	if res := s.get("/console/operations/" + review.ID.String()); !strings.Contains(res.body, `href="/console/operations/`+comp+`"`) || !strings.Contains(res.body, "Compensated by") {
		t.Errorf("the original does not link its compensation %s", comp)
	}
	if res := s.get("/console/operations/" + comp); !strings.Contains(res.body, `href="/console/operations/`+review.ID.String()+`"`) || !strings.Contains(res.body, "Compensation for") {
		t.Errorf("the compensation does not link the original")
	}
	if res := s.get("/console/operations/not-a-uuid"); res.status != http.StatusNotFound {
		t.Errorf("a malformed id: %d, want 404", res.status)
	}
}

// regexp200 reports whether an HTTP status of 2xx is shown in a cell.
func regexp200(body string) bool {
	for _, code := range []string{"<td>200</td>", "<td>201</td>"} {
		if strings.Contains(body, code) {
			return true
		}
	}
	return false
}

func TestDispatchPausesAndResumes(t *testing.T) {
	t.Parallel()
	p := setup(t)
	s := signIn(t, p, p.Operator)
	res := s.post("/console/dispatch/pause", url.Values{"provider": {"acme"}})
	if res.status != http.StatusSeeOther {
		t.Fatalf("pause: %d\n%s", res.status, res.body)
	}
	page := s.get(res.location)
	name := principal(t, p, p.Operator).Name
	if !strings.Contains(page.body, "operator:"+name) || !strings.Contains(page.body, "<td>acme</td>") || !strings.Contains(page.body, "Paused.") {
		t.Errorf("the dispatch page does not show the pause by whom:\n%s", page.body)
	}
	pauses, err := p.Store.Pauses(context.Background(), p.TenantID)
	if err != nil || len(pauses) != 1 || pauses[0].Provider != "acme" {
		t.Fatalf("pauses = %v, %v; want acme", pauses, err)
	}
	if res := s.post("/console/dispatch/pause", url.Values{"provider": {"nope"}}); res.status != http.StatusUnprocessableEntity || !strings.Contains(res.body, "unknown_provider") {
		t.Errorf("pause of an unknown provider: %d\n%s", res.status, res.body)
	}
	res = s.post("/console/dispatch/resume", url.Values{"provider": {"acme"}})
	if res.status != http.StatusSeeOther {
		t.Fatalf("resume: %d", res.status)
	}
	if page := s.get(res.location); !strings.Contains(page.body, "1 pause(s) removed") || !strings.Contains(page.body, "Nothing is paused") {
		t.Errorf("after resume:\n%s", page.body)
	}
}

func TestCallsInFlightShowTheirAge(t *testing.T) {
	t.Parallel()
	p := setup(t)
	op := p.Enqueue("po-fly", `{"sku":"A-1","qty":1}`)
	if _, err := p.Store.Transition(context.Background(), ledger.Change{
		ID: op.ID, From: op.Status, Version: op.Version, To: ledger.StatusDispatching, Kind: "claimed", Actor: "test",
		LeaseOwner: "worker-7", LeaseFor: time.Minute,
	}); err != nil {
		t.Fatal(err)
	}
	s := signIn(t, p, p.Operator)
	res := s.get("/console/dispatch")
	if !strings.Contains(res.body, op.ID.String()) || !strings.Contains(res.body, "worker-7") {
		t.Errorf("the dispatch page does not list the call in flight:\n%s", res.body)
	}
}

func TestConsoleServesItsStylesheetAndNotFound(t *testing.T) {
	t.Parallel()
	p := setup(t)
	s := newSession(t, p)
	if res := s.get("/console/static/console.css"); res.status != http.StatusOK || !strings.Contains(res.header.Get("Content-Type"), "text/css") {
		t.Errorf("stylesheet: %d %s", res.status, res.header.Get("Content-Type"))
	}
	if res := s.get("/console/nope"); res.status != http.StatusNotFound {
		t.Errorf("unknown page: %d", res.status)
	}
	if res := s.get("/console/"); res.status != http.StatusSeeOther || res.location != "/console/signin" {
		t.Errorf("home signed out: %d → %q", res.status, res.location)
	}
	if res := s.get("/healthz"); res.status != http.StatusOK {
		t.Errorf("the API beside the console: /healthz %d", res.status)
	}
}

// TestAnotherTenantsDispatchAndDecisionsStayApart: another tenant's
// operator sees none of this tenant's calls in flight or pauses, and its
// pause stops nothing of this tenant's; another tenant's approver cannot
// deny this tenant's proposal, which answers like a missing one.
func TestAnotherTenantsDispatchAndDecisionsStayApart(t *testing.T) {
	t.Parallel()
	p := setup(t)
	proposal := propose(t, p, "po-apart", `{"sku":"A-1","qty":1}`)
	op := p.Enqueue("po-fly-apart", `{"sku":"A-1","qty":1}`)
	if _, err := p.Store.Transition(context.Background(), ledger.Change{
		ID: op.ID, From: op.Status, Version: op.Version, To: ledger.StatusDispatching, Kind: "claimed", Actor: "test",
		LeaseOwner: "worker-apart", LeaseFor: time.Minute,
	}); err != nil {
		t.Fatal(err)
	}
	mine := signIn(t, p, p.Operator)
	if res := mine.post("/console/dispatch/pause", url.Values{"action": {testpipeline.OtherAction}}); res.status != http.StatusSeeOther {
		t.Fatalf("pause: %d\n%s", res.status, res.body)
	}
	otherOperator := signIn(t, p, p.TokenFor("Other Corp.", auth.RoleOperator))
	otherApprover := signIn(t, p, p.TokenFor("Other Corp.", auth.RoleApprover))

	page := otherOperator.get("/console/dispatch")
	if page.status != http.StatusOK || strings.Contains(page.body, op.ID.String()) || strings.Contains(page.body, "worker-apart") ||
		!strings.Contains(page.body, "Nothing is paused") || !strings.Contains(page.body, "No call is in flight") {
		t.Errorf("another tenant's dispatch page shows this tenant's pause or call in flight:\n%s", page.body)
	}
	if res := otherOperator.post("/console/dispatch/pause", url.Values{"provider": {"acme"}}); res.status != http.StatusSeeOther {
		t.Fatalf("another tenant's pause: %d\n%s", res.status, res.body)
	}
	pauses, err := p.Store.Pauses(context.Background(), p.TenantID)
	if err != nil || len(pauses) != 1 || pauses[0].Action != testpipeline.OtherAction {
		t.Errorf("this tenant's pauses = %v, %v; want only its own", pauses, err)
	}

	theirs := otherApprover.post("/console/approvals/"+proposal.ID.String()+"/deny", url.Values{"reason": {"not yours"}})
	missing := otherApprover.post("/console/approvals/"+uuid.NewString()+"/deny", url.Values{"reason": {"not yours"}})
	if theirs.status != http.StatusNotFound || missing.status != http.StatusNotFound {
		t.Errorf("another tenant denies: %d, a missing proposal: %d; want 404 both", theirs.status, missing.status)
	}
	if got := otherApprover.get("/console/operations/" + proposal.ID.String()); got.status != http.StatusNotFound || strings.Contains(got.body, "po-apart") {
		t.Errorf("another tenant's approver reads the proposal's page: %d", got.status)
	}
	if got := p.Get(proposal); got.Status != ledger.StatusAwaitingApproval {
		t.Errorf("the proposal is %s after another tenant's deny", got.Status)
	}
}
