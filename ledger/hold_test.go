package ledger_test

import (
	"context"
	"testing"

	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/ledger"
)

// TestUnsentStatesMayBeHeld reads the states every hold of unsent work
// selects (unsentSQL, and a token's open proposals besides) as Postgres
// reads them, and holds them to the transition table: each may move to
// held, so no hold fails on an operation it found, and none is one a
// request may have reached (dispatching, unknown), which a hold must never
// take for unsent.
func TestUnsentStatesMayBeHeld(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	for name, list := range map[string]string{
		"by approval": ledger.UnsentSQL,
		"by token":    `'awaiting_approval', ` + ledger.UnsentSQL,
	} {
		var states []ledger.Status
		for _, s := range ledger.Statuses {
			var in bool
			if err := pool.QueryRow(context.Background(), `SELECT $1::text IN (`+list+`)`, string(s)).Scan(&in); err != nil {
				t.Fatalf("%s: %s IN (%s): %v", name, s, list, err)
			}
			if in {
				states = append(states, s)
			}
		}
		if len(states) == 0 {
			t.Errorf("%s: the hold selects no state", name)
		}
		for _, s := range states {
			if !s.CanMoveTo(ledger.StatusHeld) {
				t.Errorf("%s: the hold selects %s, which may not move to held", name, s)
			}
			if s == ledger.StatusDispatching || s == ledger.StatusUnknown {
				t.Errorf("%s: the hold selects %s, which a request may have reached", name, s)
			}
		}
	}
}
