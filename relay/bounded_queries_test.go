package relay

import (
	"testing"
	"time"

	"github.com/actledger/actledger/internal/bigledger"
)

// TestClaimStaysBoundedOnALargeOutbox: on a ledger of 200,000 operations
// whose outbox keeps a day of published rows (100,000), the relay's claim
// of a batch and its look for the next scheduled row read the unpublished
// rows only (bigledger.RequireBounded), never the published ones.
func TestClaimStaysBoundedOnALargeOutbox(t *testing.T) {
	t.Parallel()
	l := bigledger.New(t)
	var now *time.Time // the relay's default: the database's clock
	l.RequireBounded(t,
		bigledger.Query{Name: "relay claim (outboxClaim)", SQL: outboxClaim, Args: []any{DefaultBatchSize, now}},
		bigledger.Query{Name: "relay next due (outboxNextDue)", SQL: outboxNextDue, Args: []any{now}},
		bigledger.Query{Name: "relay delete (outboxDeletePublished)", SQL: outboxDeletePublished, Args: []any{[]int64{1, 2, 3}}},
	)
}
