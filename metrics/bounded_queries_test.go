package metrics_test

import (
	"testing"

	"github.com/actledger/actledger/internal/testbigledger"
	"github.com/actledger/actledger/metrics"
)

// TestScrapeQueriesStayBoundedOnALargeLedger: on a ledger of 200,000
// operations (97 % terminal), every query of metrics.BoundedQueries reads
// operations only through an index condition or a partial index of open
// items, never the history (bigledger.Check).
func TestScrapeQueriesStayBoundedOnALargeLedger(t *testing.T) {
	t.Parallel()
	l := testbigledger.New(t)
	l.RequireBounded(t, metrics.BoundedQueries()...)
}
