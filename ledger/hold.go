package ledger

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Operations that were never executed: nothing reached the provider, so
// holding them is always safe. Locked so a dispatcher's claim waits.
const (
	operationsUnsentByApproval = `SELECT id, status, version FROM operations
WHERE approval_id = $1 AND status IN ('queued', 'retry_wait') FOR UPDATE`

	operationsUnsentByToken = `SELECT id, status, version FROM operations
WHERE requested_by = $1 AND status IN ('queued', 'retry_wait') FOR UPDATE`
)

// HoldUnsentByToken holds every never-executed operation that token
// requested; revoking a token calls it in the revoking transaction.
func (s *Store) HoldUnsentByToken(ctx context.Context, tx pgx.Tx, token uuid.UUID, actor string) ([]Operation, error) {
	return s.holdUnsent(ctx, tx, operationsUnsentByToken, token, "token_revoked", actor)
}

func (s *Store) holdUnsent(ctx context.Context, tx pgx.Tx, query string, arg uuid.UUID, kind, actor string) ([]Operation, error) {
	type target struct {
		ID      uuid.UUID `db:"id"`
		Status  Status    `db:"status"`
		Version int64     `db:"version"`
	}
	rows, _ := tx.Query(ctx, query, arg)
	targets, err := pgx.CollectRows(rows, pgx.RowToStructByName[target])
	if err != nil {
		return nil, fmt.Errorf("find unsent operations: %w", err)
	}
	held := make([]Operation, 0, len(targets))
	for _, t := range targets {
		op, err := s.Transition(ctx, tx, Change{
			ID: t.ID, From: t.Status, Version: t.Version, To: StatusHeld,
			Kind: kind, Actor: actor,
		})
		if err != nil {
			return nil, err
		}
		held = append(held, op)
	}
	return held, nil
}
