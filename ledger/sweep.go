package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// redispatchDue is what makes a waiting operation due for a re-publish
// (operationsRedispatch): no message of its own waits in the outbox, it is
// not paused, and its last re-publish is older than its backoff.
const redispatchDue = waitsForMessage + `
      AND (o.redispatched_at IS NULL OR o.redispatched_at < o.updated_at
           OR o.redispatched_at <= coalesce(@now::timestamptz, now())
                - least(@base_us::bigint * interval '1 microsecond' * power(2, least(o.redispatches, 30))::float8, @max_backoff_us::bigint * interval '1 microsecond'))`

const (
	// operationsLeaseExpired are claims whose worker stopped reporting:
	// the call may or may not have happened.
	operationsLeaseExpired = `SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.status = 'dispatching' AND o.lease_expires_at < coalesce($1::timestamptz, now())
ORDER BY o.lease_expires_at
LIMIT $2`

	// operationsRedispatch finds operations waiting for a dispatch message
	// that should have arrived long ago (a message lost by JetStream, or
	// never delivered): queued and not updated since before, or due since
	// before, @cutoff, with no message of theirs waiting in the outbox, and
	// not paused. It takes only those whose last re-publish
	// (redispatched_at) is older than their backoff: @base_us doubled per
	// re-publish since the operation last changed, capped at
	// @max_backoff_us. It
	// records the re-publish on the operation and as an event, in the same
	// statement, so two sweepers never re-publish one operation twice.
	operationsRedispatch = `WITH candidates AS (
    -- One ordered walk per kind of wait, each along its own index and
    -- stopping at @limit (queued by operations_waiting_idx, due ones by
    -- operations_due_idx), then the longest waiting of both: one sort of
    -- every waiting operation read them all (100,000 rows, 4.7 s, on a
    -- ledger of ten million with 100,000 waiting).
    (SELECT o.id, o.updated_at, o.redispatched_at, o.updated_at AS since FROM operations o
     WHERE o.status IN (` + waitsNowSQL + `) AND o.updated_at < @cutoff AND ` + redispatchDue + `
     ORDER BY o.updated_at LIMIT @limit)
    UNION ALL
    (SELECT o.id, o.updated_at, o.redispatched_at, o.next_attempt_at FROM operations o
     WHERE o.status IN (` + waitsScheduledSQL + `) AND o.next_attempt_at < @cutoff AND ` + redispatchDue + `
     ORDER BY o.next_attempt_at LIMIT @limit)
), due AS (
    -- The oldest @limit of them, each read by its primary key and locked
    -- as the walk saw it: a worker that moved one since (updated_at) or a
    -- sweeper that re-published it (redispatched_at) makes the lock's
    -- re-check fail, and it is skipped. (Conditions on the states here
    -- would let the planner read every waiting operation again to join
    -- them: 50,000 rows on a ledger of ten million.)
    SELECT o.id FROM (SELECT id, updated_at, redispatched_at FROM candidates ORDER BY since LIMIT @limit) c
    JOIN operations o ON o.id = c.id
    WHERE o.updated_at = c.updated_at AND o.redispatched_at IS NOT DISTINCT FROM c.redispatched_at
    FOR UPDATE OF o SKIP LOCKED
), upd AS (
    UPDATE operations o SET
        redispatches    = CASE WHEN o.redispatched_at IS NULL OR o.redispatched_at < o.updated_at
                               THEN 1 ELSE o.redispatches + 1 END,
        redispatched_at = coalesce(@now::timestamptz, now())
    FROM due WHERE o.id = due.id
    RETURNING o.*
), ev AS (
    INSERT INTO operation_events (operation_id, tenant_id, at, kind, from_status, to_status, actor, detail)
    SELECT id, tenant_id, redispatched_at, @kind, status, status, @actor,
           jsonb_build_object('redispatches', redispatches,
               'next_not_before', redispatched_at + least(@base_us::bigint * interval '1 microsecond' * power(2, least(redispatches, 30))::float8,
                                                          @max_backoff_us::bigint * interval '1 microsecond'))
    FROM upd
)
SELECT ` + operationColumns + `
FROM upd o JOIN tenants t ON t.id = o.tenant_id`
)

// redispatchPlanning makes the stuck sweep's transaction plan its walks as
// nested loops over index scans, so each walk stops at its limit. Left to
// its statistics, the planner sometimes joined every waiting operation
// with the outbox by a hash or a bitmap scan and sorted them all
// (docs/benchmarks.md, "The large stage", "A run after schema 036 and
// 037"). The same SET clauses plan the set-based writes
// (schema/functions/transition_operations.sql).
const redispatchPlanning = `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;
SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off`

// LeaseExpired returns up to limit operations whose dispatch lease has
// expired.
func (s *Store) LeaseExpired(ctx context.Context, limit int) ([]Operation, error) {
	rows, _ := s.pool.Query(ctx, operationsLeaseExpired, s.nowArg(), limit)
	ops, err := pgx.CollectRows(rows, pgx.RowToStructByName[Operation])
	if err != nil {
		return nil, fmt.Errorf("find expired leases: %w", err)
	}
	return ops, nil
}

// Redispatch finds up to limit operations that have waited since before
// cutoff for a dispatch message that never came, records on each that it
// is re-published now (an event EventRedispatched) and writes its message
// again, in one transaction, and returns them. An operation that stays
// stuck is found again only after its backoff: base, doubled per
// re-publish since it last changed, at most maxBackoff.
func (s *Store) Redispatch(ctx context.Context, cutoff time.Time, base, maxBackoff time.Duration, limit int, actor string) ([]Operation, error) {
	now := s.Now()
	var stuck []Operation
	err := s.InTx(ctx, func(tx *Tx) error {
		if _, err := tx.tx.Exec(ctx, redispatchPlanning); err != nil {
			return fmt.Errorf("find stuck operations: %w", err)
		}
		rows, _ := tx.tx.Query(ctx, operationsRedispatch, pgx.StrictNamedArgs{
			"cutoff": cutoff, "now": s.nowArg(), "base_us": base.Microseconds(), "max_backoff_us": maxBackoff.Microseconds(),
			"limit": limit, "actor": actor, "kind": EventRedispatched,
		})
		var err error
		stuck, err = pgx.CollectRows(rows, pgx.RowToStructByName[Operation])
		if err != nil {
			return fmt.Errorf("find stuck operations: %w", err)
		}
		for _, op := range stuck {
			subject, err := s.dispatchSubject(op.Provider)
			if err != nil {
				return err
			}
			// Due since before cutoff (DispatchDue): sent at once.
			m := DispatchMessage{Subject: subject, OperationID: op.ID, Version: op.Version, RepublishedAt: now, Traceparent: deref(op.Traceparent)}
			if err := s.insertOutbox(ctx, tx, m.Outbox()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return stuck, nil
}
