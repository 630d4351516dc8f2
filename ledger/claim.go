package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// operationsInFlight is a page of the dispatching operations the caller
// ($1, $5) may see, oldest claim first, after position ($2, $3) when $2 is
// set.
const operationsInFlight = `SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.tenant_id = $1 AND scope_admits($5, o.scope) AND o.status = 'dispatching'
  AND ($2::timestamptz IS NULL OR (o.updated_at, o.id) > ($2, $3))
ORDER BY o.updated_at, o.id
LIMIT $4`

// InFlight lists at most limit of the operations being dispatched now that
// in may see, after position after (nil: from the oldest claim): what may
// still land at a provider even after a pause.
func (s *Store) InFlight(ctx context.Context, in Access, after *Position, limit int) ([]Operation, error) {
	at, id := after.args()
	rows, _ := s.pool.Query(ctx, operationsInFlight, in.Tenant, at, id, limit, in.scope())
	ops, err := pgx.CollectRows(rows, pgx.RowToStructByName[Operation])
	if err != nil {
		return nil, fmt.Errorf("list in-flight operations: %w", err)
	}
	return ops, nil
}

// operationConfirmClaim is the check a worker makes right before every
// provider call: the claim is still its own (same version, owner and
// status: nobody expired, settled or re-claimed it), its lease now lasts
// at least @hold_us microseconds past the database's clock (the call's full
// timeout plus a margin), and the approval and the requesting token still
// stand, the approval granted for the target the call goes to (@account,
// @environment; see operationLapse). The version bumps, so any writer
// holding the version read before (a sweeper that found the old lease expired) is fenced. clock_timestamp,
// not now(): a shared batch's transaction may have started before the
// worker asked, and the worker measures from when it asked.
const operationConfirmClaim = `WITH clock AS (
    SELECT coalesce(@now::timestamptz, clock_timestamp()) AS now
), upd AS (
    UPDATE operations SET
        version          = version + 1,
        lease_expires_at = greatest(lease_expires_at, clock.now + @hold_us::bigint * interval '1 microsecond')
    FROM clock
    WHERE id = @id AND version = @version AND status = 'dispatching' AND lease_owner = @owner
    RETURNING operations.version, operations.lease_expires_at, operations.approval_id, operations.requested_by, clock.now
)
SELECT u.version, u.lease_expires_at, u.now,
    operation_lapse(a, k, u.now, @account::text, @environment::text) AS lapse
FROM upd u
JOIN approvals a ON a.id = u.approval_id
JOIN api_tokens k ON k.id = u.requested_by`

var confirmClaimStmt = mustNamed(operationConfirmClaim)

// Confirmation is a worker's claim as the database confirmed it right
// before a provider call.
type Confirmation struct {
	// Version is the claim's new version; every later write of the worker
	// is conditional on it.
	Version int64 `db:"version"`
	// LeaseExpiresAt is the lease end, on the database's clock.
	LeaseExpiresAt time.Time `db:"lease_expires_at"`
	// Now is the database's clock when it confirmed.
	Now time.Time `db:"now"`
	// Lapse says whether the approval or the token lapsed meanwhile.
	Lapse Lapse `db:"lapse"`
}

// ConfirmClaim confirms that operation id, claimed by owner at version,
// is still that worker's claim, extends its lease to at least the
// database's now plus hold, and tells whether it may still be sent to at
// (the provider account and environment the call goes to). It
// returns ErrStale when the claim is no longer the worker's: then the
// worker must not call the provider. Concurrent confirmations share round
// trips and commits (see Record).
func (s *Store) ConfirmClaim(ctx context.Context, id uuid.UUID, version int64, owner string, hold time.Duration, at Target) (Confirmation, error) {
	var (
		conf       Confirmation
		confirmErr error
	)
	args, err := confirmClaimStmt.args(pgx.StrictNamedArgs{
		"id": id, "version": version, "owner": owner, "now": s.nowArg(), "hold_us": hold.Microseconds(),
		"account": at.Account, "environment": at.Environment,
	})
	if err != nil {
		return Confirmation{}, err
	}
	err = s.group.do(ctx, id, func(b *pgx.Batch) {
		b.Queue(confirmClaimStmt.SQL, args...).Query(func(rows pgx.Rows) error {
			c, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Confirmation])
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				confirmErr = fmt.Errorf("%w: claim of %s at version %d by %s is no longer held", ErrStale, id, version, owner)
				return nil
			case err != nil:
				return fmt.Errorf("confirm claim of %s: %w", id, err)
			}
			conf, confirmErr = c, nil
			return nil
		})
	})
	if err != nil {
		return Confirmation{}, err
	}
	return conf, confirmErr
}
