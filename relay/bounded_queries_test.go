package relay_test

import (
	"testing"

	"github.com/actledger/actledger/internal/testbigledger"
	"github.com/actledger/actledger/relay"
)

// TestClaimStaysBoundedOnALargeOutbox: on a ledger of 200,000 operations
// whose outbox keeps a day of published rows (100,000), every query of
// relay.BoundedQueries reads the unpublished rows only
// (bigledger.Check), never the published ones.
func TestClaimStaysBoundedOnALargeOutbox(t *testing.T) {
	t.Parallel()
	l := testbigledger.New(t)
	l.RequireBounded(t, relay.BoundedQueries()...)
}
