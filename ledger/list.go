package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// operationsPage lists a tenant's operations, newest first, optionally of
// one status, after a (created_at, id) position. It is an agent's view of
// its own work (GET /v1/operations?status=), scoped to the caller's access
// like every read.
const operationsPage = `SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.tenant_id = @tenant AND scope_admits(@scope, o.scope)
  AND (@status::text IS NULL OR o.status = @status::text)
  AND (@before_at::timestamptz IS NULL OR (o.created_at, o.id) < (@before_at::timestamptz, @before_id::uuid))
ORDER BY o.created_at DESC, o.id DESC
LIMIT @limit`

// OperationsCursor is the position of the last operation of a page.
type OperationsCursor struct {
	CreatedAt time.Time `json:"t"`
	ID        uuid.UUID `json:"id"`
}

// OperationsPage returns at most limit operations that in may see, newest
// first, after the position after (nil: from the newest); status, when not
// empty, keeps only operations in that state.
func (s *Store) OperationsPage(ctx context.Context, in Access, status Status, after *OperationsCursor, limit int) ([]Operation, error) {
	var beforeAt *time.Time
	beforeID := uuid.Nil
	if after != nil {
		beforeAt, beforeID = &after.CreatedAt, after.ID
	}
	var statusArg *string
	if status != "" {
		st := string(status)
		statusArg = &st
	}
	rows, _ := s.pool.Query(ctx, operationsPage, pgx.StrictNamedArgs{
		"tenant": in.Tenant, "scope": in.scope(), "status": statusArg, "before_at": beforeAt, "before_id": beforeID, "limit": limit,
	})
	ops, err := pgx.CollectRows(rows, pgx.RowToStructByName[Operation])
	if err != nil {
		return nil, fmt.Errorf("list operations: %w", err)
	}
	return ops, nil
}
