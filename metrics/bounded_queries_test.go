package metrics

import (
	"testing"

	"github.com/actledger/actledger/internal/bigledger"
)

// TestScrapeQueriesStayBoundedOnALargeLedger: on a ledger of 200,000
// operations (97 % terminal), what a scrape of /metrics reads (the counts
// by state, the open review items and approval requests) and the fold on
// its timer read operations only through an index condition or a partial
// index of open items, never the history (bigledger.RequireBounded).
func TestScrapeQueriesStayBoundedOnALargeLedger(t *testing.T) {
	t.Parallel()
	l := bigledger.New(t)
	l.RequireBounded(t,
		bigledger.Query{Name: "operations by state (operationsByState)", SQL: operationsByState},
		bigledger.Query{Name: "fold (operationCountsFold)", SQL: operationCountsFold},
		bigledger.Query{Name: "approval requests gauge (approvalRequestsOpen)", SQL: approvalRequestsOpen},
		bigledger.Query{Name: "review gauge (reviewOpen)", SQL: reviewOpen},
	)
}
