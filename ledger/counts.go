package ledger

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// operationCountsOf is how many operations of a tenant, or of one access
// scope of it, are in each state: the counts the trigger of
// schema/functions/operation_counts_track_by_scope.sql keeps (folded, plus
// the deltas not folded yet, read in one snapshot), never a count of the
// ledger. It reads a few rows per scope and state, and the deltas since
// the last fold (metrics.Folder).
const operationCountsOf = `SELECT status, sum(n)::bigint AS n FROM (
    SELECT status, n FROM operation_counts WHERE tenant_id = $1 AND scope_admits($2, scope)
    UNION ALL
    SELECT status, delta FROM operation_count_deltas WHERE tenant_id = $1 AND scope_admits($2, scope)
) c GROUP BY status`

// OperationCounts returns how many operations in may see are in each
// state; a state without any is absent.
func (s *Store) OperationCounts(ctx context.Context, in Access) (map[Status]int64, error) {
	rows, _ := s.pool.Query(ctx, operationCountsOf, in.Tenant, in.scope())
	counts := make(map[Status]int64, len(Statuses))
	var st Status
	var n int64
	_, err := pgx.ForEachRow(rows, []any{&st, &n}, func() error {
		if n != 0 {
			counts[st] = n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count operations by state: %w", err)
	}
	return counts, nil
}
