package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// The supplier's answer echoes the order (its params, its creation time):
// the attempt's event keeps only what recovery needs (the provider's
// evidence.keep, by default id, status, the reference field and param),
// and an agent's token sees no supplier answer at all, while an operator
// sees the kept fields.
func TestEvidenceKeepsWhatRecoveryNeedsAndAgentsSeeNoAnswers(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0})
	op := p.Enqueue("po-1", `{"sku":"A-1","note":"deliver to Ann Smith, 12 Elm St"}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusSucceeded, 15*time.Second)

	_, operator := p.Do("GET", "/v1/operations/"+op.ID.String()+"/events", p.Operator, "")
	var body string
	for _, e := range operator["events"].([]any) {
		ev := e.(map[string]any)
		if ev["kind"] == string(ledger.EventAttempt) {
			body, _ = ev["detail"].(map[string]any)["body"].(string)
		}
	}
	if !strings.Contains(body, `"id":"ord_`) || !strings.Contains(body, `"client_reference":"`+op.ExternalKey+`"`) ||
		strings.Contains(body, "Ann Smith") || strings.Contains(body, "created_at") {
		t.Errorf("operator's attempt evidence = %s, want only id, status and the reference", body)
	}
	_, agent := p.Do("GET", "/v1/operations/"+op.ID.String()+"/events", p.Agent, "")
	for _, e := range agent["events"].([]any) {
		if d, ok := e.(map[string]any)["detail"].(map[string]any); ok {
			if _, has := d["body"]; has {
				t.Errorf("an agent sees a supplier's answer: %v", d)
			}
		}
	}
}
