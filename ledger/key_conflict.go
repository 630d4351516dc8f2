package ledger

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// keyConflictRecord counts one more conflict of operation @operation and,
// for its first, appends the key_conflict event, in one statement: the
// count and the event never disagree, and ON CONFLICT makes concurrent
// first conflicts count 1 and 2, so exactly one appends. A history thus
// holds one key_conflict event however often a key is reused with other
// params (schema 023).
const keyConflictRecord = `WITH counted AS (
    INSERT INTO operation_key_conflicts AS c (operation_id, conflicts, first_at, last_at)
    VALUES (@operation, 1, coalesce(@now::timestamptz, now()), coalesce(@now::timestamptz, now()))
    ON CONFLICT (operation_id) DO UPDATE SET conflicts = c.conflicts + 1, last_at = EXCLUDED.last_at
    RETURNING conflicts
)
INSERT INTO operation_events (operation_id, tenant_id, at, kind, from_status, to_status, actor, detail)
SELECT o.id, o.tenant_id, coalesce(@now::timestamptz, now()), @kind, o.status, o.status, @actor, @detail
FROM operations o, counted
WHERE o.id = @operation AND counted.conflicts = 1
FOR KEY SHARE OF o`

// eventColumns are the columns of an event as the history shows it, over
// operation_events e LEFT JOIN eventConflictCount: the key_conflict event
// carries in its detail how many conflicts the operation has had
// (conflicts, the first included) and when the last one was
// (last_conflict_at, RFC 3339 UTC). The stored event is not changed.
const eventColumns = `e.seq, e.at, e.kind, e.from_status, e.to_status, e.actor,
    CASE WHEN kc.operation_id IS NULL THEN e.detail
         ELSE e.detail || jsonb_build_object('conflicts', kc.conflicts,
             'last_conflict_at', to_char(kc.last_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')) END AS detail`

// eventConflictCount joins an event to its operation's conflict count, for
// the key_conflict event only.
const eventConflictCount = `LEFT JOIN operation_key_conflicts kc ON e.kind = 'key_conflict' AND kc.operation_id = e.operation_id`

// recordKeyConflict records that a request reused operation id's key with
// other params: the first time as a key_conflict event with detail, every
// time in the operation's conflict count.
func (s *Store) recordKeyConflict(ctx context.Context, db DBTX, id uuid.UUID, actor string, detail any) error {
	body, err := marshalDetail(detail)
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, keyConflictRecord, pgx.StrictNamedArgs{
		"operation": id, "now": s.nowArg(), "kind": EventKeyConflict, "actor": actor, "detail": body,
	}); err != nil {
		return fmt.Errorf("record a key conflict of %s: %w", id, err)
	}
	return nil
}
