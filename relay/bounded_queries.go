package relay

import (
	"time"

	"github.com/actledger/actledger/internal/bounded"
)

// BoundedQueries are the relay's claim of a batch, its look for the next
// scheduled row and its delete of a published batch: statements that must
// read the unpublished rows only, never the day of published ones the
// outbox keeps. The test on a large outbox checks their plans and the
// benchmark's large stage times them (internal/bigledger).
func BoundedQueries() []bounded.Query {
	var now *time.Time // the relay's default: the database's clock
	return []bounded.Query{
		{Name: "relay claim (outboxClaim)", SQL: outboxClaim, Args: []any{DefaultBatchSize, now}},
		{Name: "relay next due (outboxNextDue)", SQL: outboxNextDue, Args: []any{now}},
		{Name: "relay delete (outboxDeletePublished)", SQL: outboxDeletePublished, Args: []any{[]int64{1, 2, 3}}},
	}
}
