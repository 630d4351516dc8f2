package ledger_test

import (
	"testing"

	"github.com/actledger/actledger/internal/testbigledger"
	"github.com/actledger/actledger/ledger"
)

// TestQueriesStayBoundedOnALargeLedger: on a ledger of 200,000 operations
// (97 % terminal) and 840,000 events, every query of
// ledger.BoundedQueries reads operations and operation_events through an
// index condition or under a limit, and never more than
// bigledger.MaxRowsRead rows of them: what it costs grows with the open
// work, not with the history.
func TestQueriesStayBoundedOnALargeLedger(t *testing.T) {
	t.Parallel()
	l := testbigledger.New(t)
	l.RequireBounded(t, ledger.BoundedQueries(l.Fixture)...)
}
