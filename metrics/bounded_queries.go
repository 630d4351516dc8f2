package metrics

import "github.com/actledger/actledger/internal/bounded"

// BoundedQueries are what a scrape of /metrics reads (the counts by state,
// the open review items and approval requests, the statement runs' totals
// and last runs) and the fold on its timer:
// statements that must read operations only through an index condition or
// a partial index of open items, never the history. The test on a large
// ledger checks their plans and the benchmark's large stage times them
// (internal/bigledger).
func BoundedQueries() []bounded.Query {
	return []bounded.Query{
		{Name: "operations by state (operationsByState)", SQL: operationsByState},
		{Name: "fold (operationCountsFold)", SQL: operationCountsFold},
		{Name: "approval requests gauge (approvalRequestsOpen)", SQL: approvalRequestsOpen},
		{Name: "review gauge (reviewOpen)", SQL: reviewOpen},
		{Name: "statement totals (statementTotals)", SQL: statementTotals},
		{Name: "last statement runs (statementLastRuns)", SQL: statementLastRuns},
	}
}
