package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// TestUnmatchedEvidenceIsSettledOnlyByItsTenant: evidence that matches no
// operation is a review item of the provider's tenant only: another
// tenant's operator neither sees it nor closes it (it answers like a
// missing item), and the tenant's own operator closes it from the queue.
func TestUnmatchedEvidenceIsSettledOnlyByItsTenant(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour, Webhooks: true})
	p.Start(1)
	pc, _ := p.Registry.Provider("acme")
	res, err := http.Post(pc.BaseURL+"/admin/orders", "application/json", strings.NewReader(`{"client_reference":"nobody-asked","params":{"sku":"Z"}}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var evidence string
	p.Eventually(15*time.Second, "an unmatched_evidence review item", func() bool {
		_, out := p.Do("GET", "/v1/review", p.Operator, "")
		items, _ := out["items"].([]any)
		for _, it := range items {
			if m := it.(map[string]any); m["reason"] == string(ledger.ReasonUnmatchedEvidence) {
				evidence = fmt.Sprintf("ev:%.0f", m["evidence_id"].(float64))
				return true
			}
		}
		return false
	})

	other := signIn(t, p, p.TokenFor("Other Corp.", auth.RoleOperator))
	if page := other.get("/console/review"); strings.Contains(page.body, evidence) || strings.Contains(page.body, "nobody-asked") {
		t.Errorf("another tenant's review queue lists the evidence %s", evidence)
	}
	res2 := other.post("/console/review", url.Values{"item": {evidence}, "do": {"resolve_cancelled"}, "note": {"mine now"}})
	if res2.status != http.StatusOK || !strings.Contains(res2.body, "0 of 1") || !strings.Contains(res2.body, "There is nothing here") {
		t.Errorf("another tenant closes the evidence: %d\n%s", res2.status, res2.body)
	}

	mine := signIn(t, p, p.Operator)
	if page := mine.get("/console/review"); !strings.Contains(page.body, `value="`+evidence+`"`) {
		t.Fatalf("the tenant's review queue does not offer %s:\n%s", evidence, page.body)
	}
	res3 := mine.post("/console/review", url.Values{"item": {evidence}, "do": {"resolve_cancelled"}, "note": {"test order placed by hand"}})
	if res3.status != http.StatusOK || !strings.Contains(res3.body, "1 of 1") || !strings.Contains(res3.body, "evidence closed") {
		t.Errorf("the tenant closes its evidence: %d\n%s", res3.status, res3.body)
	}
}
