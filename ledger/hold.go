package ledger

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// unsentSQL lists the states of operations that were never executed and
// that no worker holds, queued and retry_wait: nothing reached the
// provider, so holding them is always safe. Every hold of unsent work
// reads it. It is a literal, not a parameter: the partial indexes that
// find these operations by approval and by token
// (operations_unsent_approval_idx, operations_unsent_requested_by_idx)
// list the same states, and Postgres uses a partial index only where it
// can prove from the statement that its states are among the index's,
// which a generic plan of a cached statement cannot do for a parameter.
// TestUnsentStatesMayBeHeld holds each state to the transition table.
const unsentSQL = `'queued', 'retry_wait'`

// Operations that were never executed (unsentSQL), locked so a
// dispatcher's claim waits.
const (
	operationsUnsentByApproval = `SELECT id, status, version FROM operations
WHERE approval_id = $1 AND status IN (` + unsentSQL + `) FOR UPDATE`

	// operationsUnsentByToken includes the token's open proposals: a
	// proposal from a token that is no longer trusted must not be approved.
	operationsUnsentByToken = `SELECT id, status, version FROM operations
WHERE requested_by = $1 AND status IN ('awaiting_approval', ` + unsentSQL + `) FOR UPDATE`

	// operationsUnsentByApprovals are the never-executed operations under
	// any of the approvals $1.
	operationsUnsentByApprovals = `SELECT id, status, version FROM operations
WHERE approval_id = ANY ($1) AND status IN (` + unsentSQL + `)
ORDER BY id
FOR UPDATE`

	// approvalsRevokeByApprover revokes every standing approval the
	// approver token $1 granted (approvals revoked before had their unsent
	// operations held then).
	approvalsRevokeByApprover = `UPDATE approvals SET revoked_at = coalesce($2::timestamptz, now())
WHERE approver_token_id = $1 AND revoked_at IS NULL
RETURNING id`
)

// RevokeApprovalsOfApprover is what revoking an approver's token does to
// the approvals it granted: they no longer stand. A revoked token is one
// whose holder may not be who they were (a leaked token, someone who left),
// so what it decided is not trusted further: every approval it granted is
// revoked (new operations under it answer 403 approval_revoked), and every
// operation under them that was never executed (queued, retry_wait) is
// held, in the caller's transaction. An operation whose outcome is unknown
// is left to evidence and lookups, and never sent again: the dispatcher
// finds its approval revoked before any call (the rule of an approval
// revoke). It returns how many approvals it revoked and the operations it
// held.
func (s *Store) RevokeApprovalsOfApprover(ctx context.Context, tx pgx.Tx, token uuid.UUID, actor string) (int, []Operation, error) {
	rows, _ := tx.Query(ctx, approvalsRevokeByApprover, token, s.nowArg())
	revoked, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return 0, nil, fmt.Errorf("revoke approvals granted by %s: %w", token, err)
	}
	if len(revoked) == 0 {
		return 0, nil, nil
	}
	held, err := s.holdUnsent(ctx, tx, operationsUnsentByApprovals, revoked, EventApproverTokenRevoked, actor)
	return len(revoked), held, err
}

// HoldUnsentByToken holds every never-executed operation that token
// requested; revoking a token calls it in the revoking transaction.
func (s *Store) HoldUnsentByToken(ctx context.Context, tx pgx.Tx, token uuid.UUID, actor string) ([]Operation, error) {
	return s.holdUnsent(ctx, tx, operationsUnsentByToken, token, EventKind(LapseTokenRevoked), actor)
}

// holdUnsent holds the operations query finds with arg, with an event of
// kind.
func (s *Store) holdUnsent(ctx context.Context, tx pgx.Tx, query string, arg any, kind EventKind, actor string) ([]Operation, error) {
	return s.holdUnsentFlagged(ctx, tx, query, arg, kind, actor, "")
}

// holdUnsentFlagged is holdUnsent that also adds flag (when not empty) to
// each held operation.
func (s *Store) holdUnsentFlagged(ctx context.Context, tx pgx.Tx, query string, arg any, kind EventKind, actor, flag string) ([]Operation, error) {
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
		// Held waits for no message: the change needs no outbox row.
		op, err := s.transitionOne(ctx, tx, Change{
			ID: t.ID, From: t.Status, Version: t.Version, To: StatusHeld,
			Kind: kind, Actor: actor, Flag: flag,
		})
		if err != nil {
			return nil, err
		}
		held = append(held, op)
	}
	return held, nil
}
