package reconciler_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// A signed success naming a proposal that was never approved (so never
// sent) cannot settle it, but it is evidence all the same: it is kept in
// the operation's history, once, and the proposal still waits for its
// decision.
func TestSuccessForAProposalStillAwaitingApprovalIsKeptAsEvidence(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore})
	p.Start(1)
	status, out := p.Propose("po-1", `{"sku":"A-1"}`)
	if status != 202 {
		t.Fatalf("propose: %d %v", status, out)
	}
	op := p.Operation(out)
	body := fmt.Sprintf(`{"event_id":"evt_1","type":"order.created","reference":%q,"provider_reference":"ord_x","status":"succeeded"}`, op.ExternalKey)
	if got := signedWebhook(t, p, testpipeline.WebhookSecret, time.Now(), body); got != 202 {
		t.Fatalf("webhook: %d, want 202", got)
	}
	p.Eventually(settle, "the webhook kept as evidence", func() bool {
		return slices.Contains(p.Kinds(op), string(ledger.EventEvidence))
	})
	if got := p.Get(op); got.Status != ledger.StatusAwaitingApproval {
		t.Errorf("status %s, want %s; history:\n%s", got.Status, ledger.StatusAwaitingApproval, p.History(op))
	}
}
