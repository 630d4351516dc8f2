package dispatcher_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// The tests in this file drive contract v3's reading of a supplier's
// answers through the whole pipeline (API → Postgres → JetStream →
// dispatcher → HTTP supplier), counting orders at the supplier.

// A response lost after commit, at a supplier without keys: the lookup
// then finds two orders for the one reference (an order someone placed
// by hand beside it). That is a duplicate effect for a person, with both
// references as evidence, never "found".
func TestLookupFindingTwoEffectsSendsTheOperationToReviewWithBoth(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: 100 * time.Millisecond, Mode: mocksupplier.Ignore})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	srv := httptest.NewServer(p.Supplier)
	t.Cleanup(srv.Close)
	resp, err := http.Post(srv.URL+"/v1/orders", "application/json",
		bytes.NewReader([]byte(`{"sku":"A-1","client_reference":"`+op.ExternalKey+`"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusReview, settle)
	history := p.History(op)
	if *done.ReviewReason != ledger.ReasonDuplicateEffect || p.Orders(op) != 2 || p.Creates(op) != 2 {
		t.Errorf("reason %s, orders %d, creates %d; want duplicate_effect, the 2 orders, 1 create of ours (and the hand-made one); history:\n%s",
			*done.ReviewReason, p.Orders(op), p.Creates(op), history)
	}
	if !strings.Contains(history, `"references"`) || !strings.Contains(history, "lookup_duplicate") {
		t.Errorf("want the lookup's references in the history:\n%s", history)
	}
}

// A body expression that fails on these params sends nothing: the
// operation goes to a person with the expression's error, and the
// supplier never hears of it.
func TestBodyThatCannotBeBuiltSendsNothingAndGoesToReview(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0,
		Create: `method: POST, path: /v1/orders, body: '{"sku": params.sku, "qty": params.qty, "client_reference": reference}'`})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusReview, settle)
	history := p.History(op)
	if *done.ReviewReason != ledger.ReasonProviderConfigError || p.Creates(op) != 0 || done.FirstSentAt != nil {
		t.Errorf("reason %s, creates %d, first send %v; want provider_config_error, nothing sent; history:\n%s",
			*done.ReviewReason, p.Creates(op), done.FirstSentAt, history)
	}
	if !strings.Contains(history, "create.body") || !strings.Contains(history, "qty") {
		t.Errorf("want the expression's error in the history:\n%s", history)
	}
}

// A 2xx whose reference cannot be read confirms the effect: the operation
// goes to a person to name it, and is never resent, though the supplier
// keeps keys and the key is well inside retention.
func TestSuccessWhoseReferenceCannotBeReadIsNeverResent(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0,
		Create: `method: POST, path: /v1/orders, reference: response.order.id`})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusReview, settle)
	done := p.NothingMore(op, settle)
	if *done.ReviewReason != ledger.ReasonReferenceMissing || p.Orders(op) != 1 || p.Creates(op) != 1 || done.ProviderReference != nil {
		t.Errorf("reason %s, orders %d, creates %d, reference %v; want reference_missing, 1, 1, none; history:\n%s",
			*done.ReviewReason, p.Orders(op), p.Creates(op), done.ProviderReference, p.History(op))
	}
}

// The supplier's own error meaning comes before the default table: a 422
// that this supplier uses for "the key holds other params" goes to a
// person with the rule's reason, where the default table would have said
// failed, no effect.
func TestSuppliersOwnErrorMeaningHandsTheAnswerToAPerson(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0,
		ProviderExtra: "    outcomes:\n      - {when: 'status == 422', outcome: review, reason: the supplier holds this key with other params}\n"})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.Reject422})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusReview, settle)
	history := p.History(op)
	if *done.ReviewReason != ledger.ReasonProviderOutcome || p.Orders(op) != 0 || p.Creates(op) != 1 {
		t.Errorf("reason %s, orders %d, creates %d; want provider_outcome, 0, 1; history:\n%s",
			*done.ReviewReason, p.Orders(op), p.Creates(op), history)
	}
	if !strings.Contains(history, "the supplier holds this key with other params") {
		t.Errorf("want the rule's reason in the attempt's event:\n%s", history)
	}
}
