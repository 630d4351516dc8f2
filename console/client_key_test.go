package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// Where the console shows an operation's key, it shows the client key
// beside it when the action derives the key from the params: the
// approvals page, the operation page and the review queue, escaped like
// every value the agent chose.
func TestPagesShowTheClientKeyBesideTheBusinessKey(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: `key: '"po-" + string(params.purchase_order)'`})
	// The API refuses invisible characters in a key; a client key stored
	// before that rule (or written past the API) is still shown escaped.
	proposal := testfactory.Operation(t, p.Store, testfactory.OperationOpts{
		Tenant: p.FactoryTenant, Key: "po-37", ClientKey: "tool-call-\u202e7", Params: `{"purchase_order":37,"sku":"A-1"}`,
		Status: ledger.StatusAwaitingApproval,
	})
	status, out := p.Do("POST", "/v1/operations", p.Agent, `{"action":"`+testpipeline.Action+`","key":"tool-call-8","params":{"purchase_order":38,"sku":"A-1"},"approval_id":"`+
		p.Approve(`{"purchase_order":38,"sku":"A-1"}`, time.Hour).ID.String()+`"}`)
	if status != http.StatusCreated {
		t.Fatalf("enqueue: %d %v", status, out)
	}
	queued := p.Operation(out)
	reviewed, err := p.Store.Transition(context.Background(), ledger.Change{
		ID: queued.ID, From: queued.Status, Version: queued.Version, To: ledger.StatusReview, Kind: "test_review", Actor: "test",
		Review: &ledger.Review{Reason: ledger.ReasonOutcomeUnknown, Owner: "supply-ops", Deadline: time.Now().Add(time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}

	approver, operator := signIn(t, p, p.Approver), signIn(t, p, p.Operator)
	for _, tc := range []struct {
		name      string
		s         *session
		page      string
		key, want string
	}{
		{"approvals", approver, "/console/approvals", "po-37", `client key tool-call-\u202e7`},
		{"operation", approver, "/console/operations/" + proposal.ID.String(), "po-37", `tool-call-\u202e7`},
		{"review queue", operator, "/console/review", "po-38", `client key tool-call-8`},
		{"operation in review", operator, "/console/operations/" + reviewed.ID.String(), "po-38", `tool-call-8`},
	} {
		res := tc.s.get(tc.page)
		if res.status != http.StatusOK || !strings.Contains(res.body, tc.key) || !strings.Contains(res.body, tc.want) || strings.Contains(res.body, "\u202e") {
			t.Errorf("%s: %d; want key %s and %s shown, no raw override\n%s", tc.name, res.status, tc.key, tc.want, res.body)
		}
	}
}
