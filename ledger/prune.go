package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// DefaultPruneBatch is how many operations one prune transaction archives
// and deletes: small enough that its locks (on terminal rows only) and its
// delete last milliseconds, large enough that a commit and an fsync of the
// archive are shared by many operations.
const DefaultPruneBatch = 500

// ErrPruneArchive wraps the error of a batch's archive: nothing of the
// batch was deleted.
var ErrPruneArchive = errors.New("ledger: archive of a prune batch failed")

const (
	// pruneSetting lets the deletes of operation_events through the
	// append-only trigger for this transaction only (schema 031).
	pruneSetting = `SELECT set_config('actledger.prune', 'on', true)`

	// tenantsAll are the tenants, whose old operations a prune visits one
	// tenant at a time (operations_tenant_created_idx leads with tenant).
	tenantsAll = `SELECT id FROM tenants ORDER BY id`

	// operationsPrunable selects and locks the next batch of a tenant's
	// operations that a prune may delete, in (created_at, id) order after
	// the cursor, by operations_tenant_created_idx: terminal (@terminal,
	// from Status.Terminal) and unchanged since before @cutoff, and
	// nothing live still needs it:
	//   - no stale result of it waits for the reconciler (the reconciler
	//     applies the row to the operation);
	//   - no dispatch message of it waits in the outbox (the dispatcher
	//     reads the operation it names);
	//   - no compensation of it is still in the ledger (an operator's
	//     resolution names it, detail compensation_operation_id): a failed
	//     compensation reopens the operation it compensates
	//     (compensationFailed), so the operation stays while its
	//     compensation does, and goes in a later batch or run after it.
	// An operation in review or any open state is never terminal. SKIP
	// LOCKED: a row a live transaction holds (late evidence settling it
	// again) is passed over, never waited for; the next run finds it.
	// created_at precedes updated_at, so created_at < @cutoff is the
	// index's bound, and updated_at < @cutoff the rule. Each check is a
	// scalar subquery, which the planner keeps per candidate row (a probe
	// of an index that leads with the operation's id): as NOT EXISTS it
	// was planned as an anti-join that hashed every resolved event of the
	// ledger, a Seq Scan of operation_events (docs/benchmarks.md,
	// "Measurements the code's comments point to").
	operationsPrunable = `SELECT o.id, o.created_at FROM operations o
WHERE o.tenant_id = @tenant
  AND o.created_at < @cutoff
  AND (o.created_at, o.id) > (@after_at, @after_id)
  AND o.updated_at < @cutoff
  AND o.status = ANY (@terminal)
  AND NOT coalesce((SELECT true FROM stale_results r
      WHERE r.operation_id = o.id AND r.applied_at IS NULL LIMIT 1), false)
  AND NOT coalesce((SELECT true FROM outbox m
      WHERE split_part(m.msg_id, '.', 2) = o.id::text AND m.published_at IS NULL AND m.msg_id LIKE 'dispatch.%.%' LIMIT 1), false)
  AND NOT coalesce((SELECT true FROM operation_events e JOIN operations c ON c.id = (e.detail->>'compensation_operation_id')::uuid
      WHERE e.operation_id = o.id AND e.kind = '` + string(EventResolved) + `' AND e.detail ? 'compensation_operation_id' LIMIT 1), false)
ORDER BY o.created_at, o.id
LIMIT @limit
FOR UPDATE OF o SKIP LOCKED`

	// operationsOfPrune reads the batch's operations as Get does.
	operationsOfPrune = `SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.id = ANY ($1)
ORDER BY o.created_at, o.id`

	// eventsOfPrune reads the batch's histories as Events does, by the
	// primary key (operation_id, seq).
	eventsOfPrune = `SELECT e.operation_id, ` + eventColumns + `
FROM operation_events e
` + eventConflictCount + `
WHERE e.operation_id = ANY ($1)
ORDER BY e.operation_id, e.seq`

	staleResultsPrune = `DELETE FROM stale_results WHERE operation_id = ANY ($1)`
	keyConflictsPrune = `DELETE FROM operation_key_conflicts WHERE operation_id = ANY ($1)`
	watchesPrune      = `DELETE FROM operation_watches WHERE operation_id = ANY ($1)`
	// notificationsPrune deletes the batch's notifications and what was
	// delivered of them (schema 028), by their operation's index.
	notificationsPrune = `WITH n AS (SELECT id FROM notifications WHERE operation_id = ANY ($1)),
d AS (DELETE FROM notification_deliveries WHERE notification_id IN (SELECT id FROM n))
DELETE FROM notifications WHERE id IN (SELECT id FROM n)`
	operationEventsDel = `DELETE FROM operation_events WHERE operation_id = ANY ($1)`

	// operationsPrune deletes the batch (operation_counts_track takes
	// them out of the counts), adds them to operations_pruned, leaves a
	// key tombstone of each (schema 041: a create under its key takes its
	// external key or is refused, and a message naming it is not taken
	// for a loss) and raises the prune horizon to this batch's time
	// (schema 040: what tells a message for a pruned operation from one
	// for a lost one where no tombstone is left).
	operationsPrune = `WITH gone AS (
    DELETE FROM operations WHERE id = ANY ($1)
    RETURNING id, tenant_id, action, key, params_fingerprint, scope, external_key, status
), tombstoned AS (
    INSERT INTO key_tombstones (operation_id, tenant_id, action, key, params_fingerprint, scope, external_key, pruned_at)
    SELECT id, tenant_id, action, key, params_fingerprint, scope, external_key, now() FROM gone
), counted AS (
    INSERT INTO operations_pruned (status, n)
    SELECT status, count(*) FROM gone GROUP BY status
    ON CONFLICT (status) DO UPDATE SET n = operations_pruned.n + EXCLUDED.n
    RETURNING status, n
), horizon AS (
    INSERT INTO prune_horizon (pruned_through)
    SELECT now() WHERE EXISTS (SELECT 1 FROM gone)
    ON CONFLICT (only_row) DO UPDATE SET pruned_through = greatest(prune_horizon.pruned_through, EXCLUDED.pruned_through)
)
SELECT status, count(*) FROM gone GROUP BY status`

	// operationsPrunedCount is what operations_pruned holds.
	operationsPrunedCount = `SELECT status, n FROM operations_pruned`
)

// The evidence and message rows a prune deletes by age alone, each walked
// in primary-key order (ids grow with time) from @after_id, @limit rows a
// batch: a batch is the next @limit rows, of which those older than
// @cutoff that nothing will read again are deleted; the walk ends at the
// first batch whose oldest row is not older than @cutoff. Each batch
// locks only the rows it deletes, SKIP LOCKED.
const (
	// webhookEventsPrune: applied (or ignored) webhook events. What a
	// webhook said is in the history of the operation it settled (the
	// evidence event); an applied row is read again only by a late
	// redelivery of its own evidence message, which finds nothing to do.
	// A redelivery of the webhook itself after its row is gone is stored
	// again, and matched against the ledger as any webhook.
	webhookEventsPrune = `WITH batch AS (
    SELECT id, received_at, applied_at FROM webhook_events WHERE id > @after_id ORDER BY id LIMIT @limit
), gone AS (
    DELETE FROM webhook_events w WHERE w.id IN (
        SELECT x.id FROM webhook_events x
        WHERE x.id = ANY (ARRAY(SELECT b.id FROM batch b WHERE b.applied_at IS NOT NULL AND b.received_at < @cutoff))
        FOR UPDATE SKIP LOCKED)
    RETURNING w.id
)
SELECT coalesce(max(b.id), 0), count(*), coalesce(min(b.received_at) >= @cutoff, true), (SELECT count(*) FROM gone)
FROM batch b`

	// outboxPrune: published messages. The relay deletes a row as soon as
	// JetStream acknowledged it; this is for rows an earlier relay marked
	// published (published_at) and kept.
	outboxPrune = `WITH batch AS (
    SELECT id, created_at, published_at FROM outbox WHERE id > @after_id ORDER BY id LIMIT @limit
), gone AS (
    DELETE FROM outbox m WHERE m.id IN (
        SELECT x.id FROM outbox x
        WHERE x.id = ANY (ARRAY(SELECT b.id FROM batch b WHERE b.published_at < @cutoff))
        FOR UPDATE SKIP LOCKED)
    RETURNING m.id
)
SELECT coalesce(max(b.id), 0), count(*), coalesce(min(b.created_at) >= @cutoff, true), (SELECT count(*) FROM gone)
FROM batch b`
)

// keyTombstonesPrune deletes the next @limit key tombstones left by
// prunes before @cutoff, in (pruned_at, operation_id) order after the
// cursor (key_tombstones_pruned_at_idx), SKIP LOCKED, and raises
// prune_horizon.tombstones_from to the newest pruned_at it deleted: every
// operation pruned after it still has its tombstone (MayHaveBeenPruned).
// It answers how many the batch held and deleted, and where it ended.
const keyTombstonesPrune = `WITH batch AS (
    SELECT operation_id, pruned_at FROM key_tombstones
    WHERE pruned_at < @cutoff AND (pruned_at, operation_id) > (@after_at, @after_id)
    ORDER BY pruned_at, operation_id LIMIT @limit
), gone AS (
    DELETE FROM key_tombstones k WHERE k.operation_id IN (
        SELECT x.operation_id FROM key_tombstones x
        WHERE x.operation_id = ANY (ARRAY(SELECT b.operation_id FROM batch b))
        FOR UPDATE SKIP LOCKED)
    RETURNING k.pruned_at
), horizon AS (
    UPDATE prune_horizon SET tombstones_from = greatest(tombstones_from, (SELECT max(pruned_at) FROM gone))
    WHERE EXISTS (SELECT 1 FROM gone)
), last AS (
    SELECT operation_id, pruned_at FROM batch ORDER BY pruned_at DESC, operation_id DESC LIMIT 1
)
SELECT (SELECT count(*) FROM batch), (SELECT count(*) FROM gone),
    coalesce((SELECT pruned_at FROM last), @after_at), coalesce((SELECT operation_id FROM last), @after_id)`

// KeyTombstonesCursor is where the next PruneKeyTombstones batch starts:
// after the tombstone of operation ID, left at PrunedAt (zero: from the
// oldest).
type KeyTombstonesCursor struct {
	PrunedAt time.Time
	ID       uuid.UUID
}

// PrunedKeyTombstones is what one PruneKeyTombstones batch deleted (or, in
// a dry run, would have) and where the next starts; Done says no older
// tombstone is left after it.
type PrunedKeyTombstones struct {
	Deleted int64
	Next    KeyTombstonesCursor
	Done    bool
}

// PruneKeyTombstones deletes, in one statement, the key tombstones among
// the next limit after after that prunes left before cutoff
// (keyTombstonesPrune). A dry run counts them in a transaction rolled
// back.
func (s *Store) PruneKeyTombstones(ctx context.Context, cutoff time.Time, after KeyTombstonesCursor, limit int, dryRun bool) (PrunedKeyTombstones, error) {
	if limit <= 0 {
		limit = DefaultPruneBatch
	}
	var out PrunedKeyTombstones
	var seen int64
	errDryRun := errors.New("dry run")
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, keyTombstonesPrune, pgx.StrictNamedArgs{
			"cutoff": cutoff, "after_at": after.PrunedAt, "after_id": after.ID, "limit": limit,
		}).Scan(&seen, &out.Deleted, &out.Next.PrunedAt, &out.Next.ID)
		if err != nil {
			return fmt.Errorf("prune key tombstones: %w", err)
		}
		if dryRun {
			return errDryRun
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDryRun) {
		return PrunedKeyTombstones{Next: after}, err
	}
	if dryRun {
		out.Deleted = seen // a dry run's batch takes no lock: it counts what would go
	}
	out.Done = seen < int64(limit)
	return out, nil
}

// History is an operation and its whole history, oldest event first, as
// a prune archives it before deleting it.
type History struct {
	Operation Operation
	Events    []Event
}

// PruneCursor is where a tenant's next prune batch starts: after the
// operation created at CreatedAt with ID (zero: from the oldest).
type PruneCursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// PruneBatch asks for one prune transaction.
type PruneBatch struct {
	Tenant uuid.UUID
	// Cutoff: operations terminal and unchanged since before it go.
	Cutoff time.Time
	After  PruneCursor
	// Limit is the most operations of the batch; default
	// DefaultPruneBatch.
	Limit int
	// DryRun rolls the batch back after the deletes: everything is
	// counted as it would go, nothing goes (and nothing is archived).
	DryRun bool
}

// PrunedOperations is what a prune batch deleted (or, in a dry run,
// would have).
type PrunedOperations struct {
	Operations   int64
	ByStatus     map[Status]int64
	Events       int64
	StaleResults int64
	KeyConflicts int64
	// Next is where the tenant's next batch starts; Done says the
	// tenant's operations created before the cutoff were all looked at.
	Next PruneCursor
	Done bool
}

// PruneOperations runs one prune transaction: it selects and locks the
// next batch of b.Tenant's operations that may go (operationsPrunable),
// reads them and their histories, hands them to archive, and only when
// archive returns nil (the archive is durable) deletes them with their
// events, stale results, key-conflict counts and watches, and commits. An
// archive error rolls everything back and is returned wrapped in
// ErrPruneArchive. archive is required; a dry run calls none and rolls
// back.
func (s *Store) PruneOperations(ctx context.Context, b PruneBatch, archive func(context.Context, []History) error) (PrunedOperations, error) {
	out := PrunedOperations{Next: b.After, ByStatus: map[Status]int64{}}
	limit := b.Limit
	if limit <= 0 {
		limit = DefaultPruneBatch
	}
	if archive == nil && !b.DryRun {
		return out, errors.New("ledger: a prune that deletes needs an archive")
	}
	terminal := terminalStatuses()
	errDryRun := errors.New("dry run")
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, pruneSetting); err != nil {
			return fmt.Errorf("allow the deletes of histories: %w", err)
		}
		rows, _ := tx.Query(ctx, operationsPrunable, pgx.StrictNamedArgs{
			"tenant": b.Tenant, "cutoff": b.Cutoff, "after_at": b.After.CreatedAt, "after_id": b.After.ID,
			"terminal": terminal, "limit": limit,
		})
		var ids []uuid.UUID
		var at time.Time
		var id uuid.UUID
		if _, err := pgx.ForEachRow(rows, []any{&id, &at}, func() error {
			ids = append(ids, id)
			out.Next = PruneCursor{CreatedAt: at, ID: id}
			return nil
		}); err != nil {
			return fmt.Errorf("select operations to prune: %w", err)
		}
		out.Done = len(ids) < limit
		if len(ids) == 0 {
			return nil
		}
		if !b.DryRun {
			histories, err := s.pruneHistories(ctx, tx, ids)
			if err != nil {
				return err
			}
			if err := archive(ctx, histories); err != nil {
				return fmt.Errorf("%w: %w", ErrPruneArchive, err)
			}
		}
		for _, d := range []struct {
			sql string
			n   *int64
		}{
			{staleResultsPrune, &out.StaleResults}, {keyConflictsPrune, &out.KeyConflicts},
			{watchesPrune, nil}, {notificationsPrune, nil}, {operationEventsDel, &out.Events},
		} {
			tag, err := tx.Exec(ctx, d.sql, ids)
			if err != nil {
				return fmt.Errorf("prune: %w", err)
			}
			if d.n != nil {
				*d.n = tag.RowsAffected()
			}
		}
		rows, _ = tx.Query(ctx, operationsPrune, ids)
		var st Status
		var n int64
		if _, err := pgx.ForEachRow(rows, []any{&st, &n}, func() error {
			out.ByStatus[st] += n
			out.Operations += n
			return nil
		}); err != nil {
			return fmt.Errorf("prune operations: %w", err)
		}
		if b.DryRun {
			return errDryRun
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		err = nil
	}
	if err != nil {
		return PrunedOperations{Next: b.After}, err
	}
	return out, nil
}

// terminalStatuses are the states Status.Terminal names, for a query's
// parameter.
func terminalStatuses() []string {
	var out []string
	for _, st := range Statuses {
		if st.Terminal() {
			out = append(out, string(st))
		}
	}
	return out
}

// pruneHistories reads the operations ids and their histories, in the
// order of operationsOfPrune.
func (s *Store) pruneHistories(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) ([]History, error) {
	rows, _ := tx.Query(ctx, operationsOfPrune, ids)
	ops, err := pgx.CollectRows(rows, pgx.RowToStructByName[Operation])
	if err != nil {
		return nil, fmt.Errorf("read operations to prune: %w", err)
	}
	type event struct {
		OperationID uuid.UUID `db:"operation_id"`
		Event
	}
	rows, _ = tx.Query(ctx, eventsOfPrune, ids)
	events, err := pgx.CollectRows(rows, pgx.RowToStructByName[event])
	if err != nil {
		return nil, fmt.Errorf("read histories to prune: %w", err)
	}
	byOp := make(map[uuid.UUID][]Event, len(ops))
	for _, e := range events {
		byOp[e.OperationID] = append(byOp[e.OperationID], e.Event)
	}
	out := make([]History, len(ops))
	for i, op := range ops {
		out[i] = History{Operation: op, Events: byOp[op.ID]}
	}
	return out, nil
}

// TenantIDs lists every tenant, for a prune that visits them in turn.
func (s *Store) TenantIDs(ctx context.Context) ([]uuid.UUID, error) {
	rows, _ := s.pool.Query(ctx, tenantsAll)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	return ids, nil
}

// PruneTable names a table a prune deletes old rows of by age alone.
type PruneTable string

// The tables PruneRows walks.
const (
	PruneWebhookEvents PruneTable = "webhook_events"
	PruneOutbox        PruneTable = "outbox"
)

// PrunedRows is what one PruneRows batch deleted and where the next
// starts.
type PrunedRows struct {
	Deleted int64
	// Next is the last id the batch looked at; Done says the walk reached
	// rows written after the cutoff (or the end).
	Next int64
	Done bool
}

// PruneRows deletes, in one statement, the rows of table among the next
// limit after id after that are older than cutoff and that nothing will
// read again (webhookEventsPrune, outboxPrune). A dry run counts them in
// a transaction rolled back.
func (s *Store) PruneRows(ctx context.Context, table PruneTable, cutoff time.Time, after int64, limit int, dryRun bool) (PrunedRows, error) {
	sql := map[PruneTable]string{PruneWebhookEvents: webhookEventsPrune, PruneOutbox: outboxPrune}[table]
	if sql == "" {
		return PrunedRows{}, fmt.Errorf("prune: no table %q", table)
	}
	if limit <= 0 {
		limit = DefaultPruneBatch
	}
	var out PrunedRows
	var seen int64
	errDryRun := errors.New("dry run")
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, sql, pgx.StrictNamedArgs{"after_id": after, "limit": limit, "cutoff": cutoff}).
			Scan(&out.Next, &seen, &out.Done, &out.Deleted)
		if err != nil {
			return fmt.Errorf("prune %s: %w", table, err)
		}
		if dryRun {
			return errDryRun
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDryRun) {
		return PrunedRows{}, err
	}
	out.Done = out.Done || seen < int64(limit)
	if seen == 0 {
		out.Next = after
	}
	return out, nil
}

// PrunedCounts is operations_pruned: how many operations prunes deleted,
// by the state they ended in (actledger_operations_pruned_total). A
// function of db, as OutboxBacklog, for the metrics collector.
func PrunedCounts(ctx context.Context, db DBTX) (map[Status]int64, error) {
	rows, _ := db.Query(ctx, operationsPrunedCount)
	out := map[Status]int64{}
	var st Status
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&st, &n}, func() error { out[st] = n; return nil }); err != nil {
		return nil, fmt.Errorf("read pruned counts: %w", err)
	}
	return out, nil
}
