package ledger

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Target is a provider account and environment: where a request can have
// created an effect. An approval is granted for one target, and a worker
// sends only to the target its operation's approval was granted for.
type Target struct {
	Account     string `json:"account" db:"account"`
	Environment string `json:"environment" db:"environment"`
}

// operationForeignTargets lists where an operation's requests may have gone
// other than ($2, $3): every claim (a worker that stopped reporting may
// have sent) and every attempt records the target it was configured for.
// Events written before targets were recorded say nothing and are skipped.
const operationForeignTargets = `SELECT DISTINCT detail->>'account' AS account, coalesce(detail->>'environment', '') AS environment
FROM operation_events
WHERE operation_id = $1 AND kind IN ('claimed', 'attempt') AND detail ? 'account'
  AND (detail->>'account', coalesce(detail->>'environment', '')) IS DISTINCT FROM ($2::text, $3::text)
ORDER BY 1, 2`

// foreignTargets returns the accounts and environments other than here that
// operation id's requests may have reached (Lookup.SentElsewhere). A lookup
// in here is trusted only when there are none: asking one account whether
// an order exists proves nothing about another.
func (s *Store) foreignTargets(ctx context.Context, id uuid.UUID, here Target) ([]Target, error) {
	rows, _ := s.pool.Query(ctx, operationForeignTargets, id, here.Account, here.Environment)
	targets, err := pgx.CollectRows(rows, pgx.RowToStructByName[Target])
	if err != nil {
		return nil, fmt.Errorf("targets of %s: %w", id, err)
	}
	return targets, nil
}
