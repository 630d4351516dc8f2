package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// PauseLedgerBehind is the reason of the dispatch pause actledger makes
// itself when a message proves that the ledger lost committed work
// (Pause.Reason, GET /v1/dispatch's paused[].reason).
const PauseLedgerBehind = "ledger_behind"

// ledgerBehindActor is the paused_by of a ledger_behind pause.
const ledgerBehindActor = "actledger"

// PrunedMargin is how much later than the prune horizon (the time of the
// last prune batch that deleted operations) an operation id's time may be
// and still count as possibly pruned: the id's time is the clock of the
// process that proposed it, the horizon the database's, and clocks kept by
// NTP differ by far less. A lost operation made within it after a prune
// batch is not told from a pruned one.
const PrunedMargin = 5 * time.Second

// Behind is the proof that the ledger lost work: a message of Kind
// ("dispatch", "evidence", "review") naming OperationID at Version,
// which the ledger does not know (Known false) or holds at an earlier
// version (Known true, At its version).
type Behind struct {
	Kind        string
	OperationID uuid.UUID
	Version     int64
	Known       bool
	At          int64
	// EvidenceID, for an evidence message, is the id of the stored row
	// it names (Kind "webhook event" or "stale result").
	EvidenceID int64
}

// String is the pause's detail and the log's summary.
func (b Behind) String() string {
	if b.EvidenceID != 0 {
		return fmt.Sprintf("an evidence message names %s %d, beyond any the ledger has made", b.Kind, b.EvidenceID)
	}
	if b.Known {
		return fmt.Sprintf("a %s message names operation %s at version %d; the ledger holds version %d", b.Kind, b.OperationID, b.Version, b.At)
	}
	if b.Version == 0 {
		// A review announcement names no version.
		return fmt.Sprintf("a %s message names operation %s, which the ledger does not hold", b.Kind, b.OperationID)
	}
	return fmt.Sprintf("a %s message names operation %s (version %d), which the ledger does not hold", b.Kind, b.OperationID, b.Version)
}

const (
	// pausesInsertLedgerBehind pauses every tenant's whole dispatch with
	// reason ledger_behind. A tenant's existing pause of everything takes
	// the reason (a resume of everything clears both alike). Bounded by
	// the tenants, a handful of rows.
	//
	// The proof is judged again in this statement, on the database the
	// pause is written to: a read that reached a lagging replica (a
	// pooler balancing reads, a multi-host URL without
	// target_session_attrs=read-write) must not pause a healthy ledger.
	// No row written: the proof does not hold here. The first proof's
	// detail is kept.
	pausesInsertLedgerBehind = `INSERT INTO dispatch_pauses (tenant_id, provider, action, paused_by, paused_at, reason, detail)
SELECT t.id, NULL, NULL, '` + ledgerBehindActor + `', coalesce(@now::timestamptz, now()), '` + PauseLedgerBehind + `', @detail
FROM tenants t
WHERE CASE
    WHEN @evidence_id::bigint <> 0 AND @webhook::boolean
        THEN @evidence_id > (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM webhook_events_id_seq)
    WHEN @evidence_id::bigint <> 0
        THEN @evidence_id > (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM stale_results_id_seq)
    WHEN @known::boolean
        THEN EXISTS (SELECT 1 FROM operations WHERE id = @operation AND version < @version)
    ELSE NOT EXISTS (SELECT 1 FROM operations WHERE id = @operation)
        AND NOT EXISTS (SELECT 1 FROM key_tombstones WHERE operation_id = @operation)
END
ON CONFLICT (tenant_id, coalesce(provider, ''), coalesce(action, ''))
DO UPDATE SET reason = EXCLUDED.reason, detail = coalesce(dispatch_pauses.detail, EXCLUDED.detail)`

	// pausesLedgerBehindExist says whether any tenant's dispatch is paused
	// for ledger_behind (actledger_ledger_behind).
	pausesLedgerBehindExist = `SELECT EXISTS (SELECT 1 FROM dispatch_pauses WHERE reason = '` + PauseLedgerBehind + `')`

	// webhookEventsBeyond and staleResultsBeyond say whether an evidence
	// row's id is later than any its table's sequence has handed out: a
	// row retention pruned had an id it handed out, a lost row's id the
	// restored sequence has not reached. Postgres logs a sequence ahead
	// of use (by up to 32 values), so after a crash the sequence may be
	// past ids it never gave: a loss among those is missed, never
	// invented.
	webhookEventsBeyond = `SELECT @id::bigint > CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM webhook_events_id_seq`
	staleResultsBeyond  = `SELECT @id::bigint > CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM stale_results_id_seq`

	// operationMayBePruned is MayHaveBeenPruned's verdict for operation
	// @id, made at @made: it left a key tombstone (schema 041), or it was
	// made no later than @margin after both the last prune batch that
	// deleted operations (schema 040) and the time after which every
	// pruned operation has a tombstone. No prune_horizon row: nothing was
	// ever pruned.
	operationMayBePruned = `SELECT EXISTS (SELECT 1 FROM key_tombstones WHERE operation_id = @id)
    OR coalesce((SELECT @made::timestamptz <= pruned_through + @margin_us::bigint * interval '1 microsecond'
        AND @made::timestamptz <= tombstones_from + @margin_us::bigint * interval '1 microsecond'
        FROM prune_horizon), false)`

	// operationExists says whether any tenant's ledger holds operation
	// @id, by the primary key.
	operationExists = `SELECT EXISTS (SELECT 1 FROM operations WHERE id = @id)`
)

// LedgerBehind pauses dispatch for every tenant with reason
// PauseLedgerBehind, detail b, and returns how many tenants it paused.
// Requests are still accepted: only claims stop, and a resume of a
// tenant's whole dispatch (ResumeDispatch with an empty scope) lifts it.
//
// The proof is judged again in the statement that pauses: when it does
// not hold there (the read that found it reached a lagging replica, or the
// row has appeared since), nothing is paused and the error is
// ErrBehindNotProven.
func (s *Store) LedgerBehind(ctx context.Context, b Behind) (int64, error) {
	tag, err := s.pool.Exec(ctx, pausesInsertLedgerBehind, pgx.NamedArgs{"now": s.nowArg(), "detail": b.String(),
		"evidence_id": b.EvidenceID, "webhook": b.Kind == "webhook event", "known": b.Known,
		"operation": b.OperationID, "version": b.Version})
	if err != nil {
		return 0, fmt.Errorf("pause dispatch, the ledger is behind: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return 0, ErrBehindNotProven
	}
	return tag.RowsAffected(), nil
}

// ErrBehindNotProven: the message's proof that the ledger lost work did
// not hold on the database the pause was to be written to; nothing was
// paused, and the message is to be judged again.
var ErrBehindNotProven = errors.New("ledger: the proof that the ledger is behind does not hold on the primary; nothing paused")

// MayHaveBeenPruned says whether an operation id the ledger does not hold
// may be one that retention pruned, so that a message naming it is not
// proof of a loss.
//
// Exact where a key tombstone can answer (schema 041): a pruned
// operation leaves one, kept for at least the longest idempotency
// retention of the providers file; found, the operation was pruned. Not
// found, it was not, if every operation pruned since the id was made
// would have left one still kept: the id (a UUIDv7, as every operation's)
// was made more than PrunedMargin after tombstones_from (before it, prunes
// kept no tombstones, or their tombstones were pruned in turn) or after
// the last prune batch that deleted operations. Only an id older than
// both may be a pruned operation whose tombstone is gone, or one pruned
// before tombstones were kept: that fallback is schema 040's prune
// horizon, and still needed for those. An id that is not a UUIDv7 was
// never an operation's, and proves nothing either.
func (s *Store) MayHaveBeenPruned(ctx context.Context, id uuid.UUID) (bool, error) {
	if id.Version() != 7 {
		return true, nil
	}
	sec, nsec := id.Time().UnixTime()
	var pruned bool
	if err := s.pool.QueryRow(ctx, operationMayBePruned, pgx.StrictNamedArgs{
		"id": id, "made": time.Unix(sec, nsec), "margin_us": PrunedMargin.Microseconds(),
	}).Scan(&pruned); err != nil {
		return false, fmt.Errorf("read the key tombstones and the prune horizon: %w", err)
	}
	return pruned, nil
}

// OperationExists says whether any tenant's ledger holds operation id: a
// message naming one the caller cannot see is another tenant's, or the
// ledger lost it.
func (s *Store) OperationExists(ctx context.Context, id uuid.UUID) (bool, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, operationExists, pgx.NamedArgs{"id": id}).Scan(&exists); err != nil {
		return false, fmt.Errorf("ask whether operation %s exists: %w", id, err)
	}
	return exists, nil
}

// EvidenceBeyond says whether the webhook event (webhook true) or stale
// result id, which the ledger does not hold, is beyond every id its table
// has handed out: then the message naming it proves that the ledger lost
// the row, and it was not pruned.
func (s *Store) EvidenceBeyond(ctx context.Context, webhook bool, id int64) (bool, error) {
	q := staleResultsBeyond
	if webhook {
		q = webhookEventsBeyond
	}
	var beyond bool
	if err := s.pool.QueryRow(ctx, q, pgx.NamedArgs{"id": id}).Scan(&beyond); err != nil {
		return false, fmt.Errorf("read the evidence sequence: %w", err)
	}
	return beyond, nil
}

// IsLedgerBehind says whether dispatch is paused because the ledger is
// behind its messages, for any tenant (actledger_ledger_behind).
func IsLedgerBehind(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (bool, error) {
	var behind bool
	if err := db.QueryRow(ctx, pausesLedgerBehindExist).Scan(&behind); err != nil {
		return false, fmt.Errorf("read ledger_behind pauses: %w", err)
	}
	return behind, nil
}
