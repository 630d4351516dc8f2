package ledger

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Target is a provider account and environment: where a request can have
// created an effect.
type Target struct {
	Account     string `json:"account" db:"account"`
	Environment string `json:"environment" db:"environment"`
}

// operationTargets lists where an operation's requests may have gone: every
// claim (a worker that stopped reporting may have sent) and every attempt
// records the target it was configured for. Events written before targets
// were recorded say nothing and are skipped.
const operationTargets = `SELECT DISTINCT detail->>'account' AS account, coalesce(detail->>'environment', '') AS environment
FROM operation_events
WHERE operation_id = $1 AND kind IN ('claimed', 'attempt') AND detail ? 'account'
ORDER BY 1, 2`

// SentTargets returns the accounts and environments operation id's requests
// may have reached. A lookup is trusted only in those: asking another
// account whether an order exists proves nothing about this one.
func (s *Store) SentTargets(ctx context.Context, id uuid.UUID) ([]Target, error) {
	rows, _ := s.pool.Query(ctx, operationTargets, id)
	targets, err := pgx.CollectRows(rows, pgx.RowToStructByName[Target])
	if err != nil {
		return nil, fmt.Errorf("targets of %s: %w", id, err)
	}
	return targets, nil
}
