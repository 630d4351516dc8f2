package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// DefaultRecoveryMargin is how much earlier than the --since an operator
// names a recovery looks (RecoverOptions.Margin). The since is read off
// a clock of the operator's (an alert, a log line, the restore's target
// time), while operations carry the database's clock; and an
// asynchronous standby loses what it had not replayed, which is behind the
// primary by its replication lag. A minute covers clocks kept by NTP (far
// under a second apart) and the lag worth worrying about: a standby
// further behind than that is alerted on (pg_stat_replication's
// replay_lag) long before it is promoted. Too wide a margin only makes
// more operations settle by a lookup or a resend under their key; too
// narrow a one leaves an operation the lost ledger sent looking unsent.
const DefaultRecoveryMargin = time.Minute

// DefaultRecoveryBatch is how many operations a recovery moves per
// transaction by default.
const DefaultRecoveryBatch = 500

// RecoverySampleSize bounds Recovery.Sample.
const RecoverySampleSize = 10

// recoveryActor is the actor of a recovery's events and paused_by of its
// pause (that of ledger_behind, so that lifting one lifts both).
const recoveryActor = ledgerBehindActor

// ErrRecoverySinceInFuture: a recovery's since is later than now; nothing
// can have changed after it, and the operator has most likely mistyped.
var ErrRecoverySinceInFuture = errors.New("ledger: recovery since a time in the future")

// RecoverOptions say which window a recovery settles.
type RecoverOptions struct {
	// Since is when the ledger may have started to lose changes (the
	// failover, the restore's target time). Required; not in the future.
	Since time.Time
	// Margin is taken off Since (DefaultRecoveryMargin when zero;
	// negative is refused).
	Margin time.Duration
	// Batch is how many operations each transaction moves
	// (DefaultRecoveryBatch when zero).
	Batch int
	// DryRun counts what a recovery would move and lift, and changes
	// nothing.
	DryRun bool
	// Logger receives a line per committed batch; nil discards.
	Logger *slog.Logger
}

// Recovery is what a recovery did (or, dry, would do).
type Recovery struct {
	DryRun bool
	// Since is the time asked for; From is Since minus the margin: the
	// operations whose last recorded change is after From are the
	// window's.
	Since, From time.Time
	// Moved counts the operations made unknown, by the state they were
	// in; Sample is some of their ids (at most RecoverySampleSize).
	// Providers are the providers of the window's operations that were
	// moved or are unknown or in review, sorted: those whose records
	// the window's reconciliation reads.
	Moved     map[Status]int
	Sample    []uuid.UUID
	Providers []string
	// Batches is how many transactions committed moves.
	Batches int
	// AlreadyUnknown and InReview are the window's operations that were
	// left as they were: unknown ones are being settled already (a
	// repeated recovery finds those it moved here), and a person decides
	// those in review.
	AlreadyUnknown, InReview int
	// LiveLease are the window's dispatching operations whose claim's
	// lease had not expired: their worker's answer settles them, or the
	// lease sweeper makes them unknown once the lease runs out.
	LiveLease int
	// MovedMeanwhile are the operations that changed between the read
	// that found them and their move (no move was made).
	MovedMeanwhile int
	// Detected counts the ledger_behind pauses that a proof of the loss
	// had made before the recovery (a dry run would lift them); Resumed
	// the tenants whose ledger_behind pause the recovery lifted (its own,
	// which held every tenant while it ran, and those). PausesKept counts
	// the operators' pauses of a whole tenant that had taken the reason
	// ledger_behind: they keep holding until an operator resumes.
	// Released counts the operations whose dispatch messages were written
	// again once the pauses were lifted.
	Detected, Resumed, PausesKept, Released int
	// Oldest is when the ledger's oldest operation was created (nil: no
	// operation): a From before it is the whole ledger.
	Oldest *time.Time
}

// Total is how many operations the recovery moved.
func (r Recovery) Total() int {
	n := 0
	for _, c := range r.Moved {
		n += c
	}
	return n
}

// recoverableStates are the states a recovery moves to unknown, in the
// order it walks them: never terminal, never a proposal (nothing may send
// it), never review (a person decides), never unknown (already settled by
// a resend under its key, a lookup or a person).
var recoverableStates = []Status{StatusQueued, StatusRetryWait, StatusDispatching}

// recoverable is an operation of the window, as the walk reads it.
type recoverable struct {
	ID           uuid.UUID `db:"id"`
	Version      int64     `db:"version"`
	Status       Status    `db:"status"`
	Provider     string    `db:"provider"`
	UpdatedAt    time.Time `db:"updated_at"`
	LeaseExpired bool      `db:"lease_expired"`
}

// operationsRecoverableTail pages through one state's operations changed
// after @from, by (updated_at, id), after the position (@after_at,
// @after_id) when @after_at is set. Each state has its own statement
// (operationsRecoverableQueued, …), with the state a literal: queued and
// retry_wait are walked along operations_waiting_idx (status, updated_at)
// from @from on, dispatching along operations_lease_idx, which holds only
// the claims in flight. A state given as a parameter would let a cached
// generic plan use neither partial index.
const operationsRecoverableTail = `
  AND o.updated_at > @from
  AND (@after_at::timestamptz IS NULL OR (o.updated_at, o.id) > (@after_at, @after_id))
ORDER BY o.updated_at, o.id
LIMIT @limit`

const operationsRecoverableHead = `SELECT o.id, o.version, o.status, o.provider, o.updated_at,
  coalesce(o.lease_expires_at < coalesce(@now::timestamptz, now()), true) AS lease_expired
FROM operations o
WHERE o.status = `

const (
	operationsRecoverableQueued      = operationsRecoverableHead + `'queued'` + operationsRecoverableTail
	operationsRecoverableRetryWait   = operationsRecoverableHead + `'retry_wait'` + operationsRecoverableTail
	operationsRecoverableDispatching = operationsRecoverableHead + `'dispatching'` + operationsRecoverableTail
)

var operationsRecoverable = map[Status]string{
	StatusQueued:      operationsRecoverableQueued,
	StatusRetryWait:   operationsRecoverableRetryWait,
	StatusDispatching: operationsRecoverableDispatching,
}

const (
	// operationsLeftInWindow counts the window's operations a recovery
	// leaves as they are (unknown, review), along operations_waiting_idx,
	// and names their providers.
	operationsLeftInWindow = `SELECT count(*) FILTER (WHERE o.status = 'unknown'), count(*) FILTER (WHERE o.status = 'review'),
  coalesce(array_agg(DISTINCT o.provider), '{}')
FROM operations o WHERE o.status IN ('unknown', 'review') AND o.updated_at > @from`

	// operationsOldest is when the oldest operation was created: the
	// first of each tenant along operations_tenant_created_idx (one row
	// per tenant), then the earliest of those.
	operationsOldest = `SELECT min(f.created_at) FROM tenants t
CROSS JOIN LATERAL (SELECT o.created_at FROM operations o WHERE o.tenant_id = t.id ORDER BY o.created_at, o.id LIMIT 1) f`

	// pausesInsertRecovery pauses every tenant's whole dispatch with
	// reason ledger_behind while a recovery runs, as a proof that the
	// ledger is behind does (pausesInsertLedgerBehind): an operation of
	// the window is never claimed and sent from the state the ledger
	// shows while the recovery walks, and a recovery cut short leaves
	// dispatch paused until it is run again.
	pausesInsertRecovery = `INSERT INTO dispatch_pauses (tenant_id, provider, action, paused_by, paused_at, reason, detail)
SELECT t.id, NULL, NULL, '` + recoveryActor + `', coalesce(@now::timestamptz, now()), '` + PauseLedgerBehind + `', @detail
FROM tenants t
ON CONFLICT (tenant_id, coalesce(provider, ''), coalesce(action, ''))
DO UPDATE SET reason = EXCLUDED.reason, detail = coalesce(dispatch_pauses.detail, EXCLUDED.detail)`

	// pausesLedgerBehindCount counts the ledger_behind pauses actledger
	// made (lifted) and the operators' that took the reason (kept).
	pausesLedgerBehindCount = `SELECT count(*) FILTER (WHERE paused_by = '` + recoveryActor + `'), count(*) FILTER (WHERE paused_by <> '` + recoveryActor + `')
FROM dispatch_pauses WHERE reason = '` + PauseLedgerBehind + `'`

	// pausesDeleteLedgerBehind lifts the ledger_behind pauses actledger
	// made, and returns their tenants.
	pausesDeleteLedgerBehind = `DELETE FROM dispatch_pauses WHERE reason = '` + PauseLedgerBehind + `' AND paused_by = '` + recoveryActor + `'
RETURNING tenant_id`

	// pausesClearLedgerBehind gives an operator's pause of a whole tenant
	// that took the reason ledger_behind (pausesInsertLedgerBehind) its
	// own meaning back: it holds until the operator resumes.
	pausesClearLedgerBehind = `UPDATE dispatch_pauses SET reason = NULL, detail = NULL
WHERE reason = '` + PauseLedgerBehind + `' AND paused_by <> '` + recoveryActor + `'`
)

// Recover settles the window of a ledger that lost its latest changes (a
// failover to an asynchronous replica, a point-in-time restore): every
// operation that is queued, retry_wait or dispatching (with an expired
// lease) and whose last recorded change is after o.Since minus o.Margin
// becomes unknown (event ledger_recovery), through Transition, so that it
// is settled by a resend under its key inside the provider's idempotency
// retention, a lookup once absence is believable, a statement or a person,
// never by a new create: the ledger it lost may have sent it. Its first
// possible send is its last recorded change (a send the lost ledger made
// came after it), and its last is now: lookups believe absence only
// visibility_lag after the recovery.
//
// It first pauses every tenant's dispatch (reason ledger_behind), so that
// no claim races the walk, then moves the window in batches of o.Batch,
// each its own transaction, state by state, oldest change first, and
// logs each batch. A move is a conditional update like any other: an
// operation a worker has just claimed (its lease live) is left to that
// worker, and one that changed since it was read is counted and left.
// When every batch committed, it lifts the ledger_behind pauses (an
// operator's own pauses stay) and releases the work that waited. An error
// leaves dispatch paused, with the moved operations unknown: running it
// again finishes (the moved operations are unknown, and not moved again).
// With o.DryRun it counts the same and changes nothing.
func (s *Store) Recover(ctx context.Context, o RecoverOptions) (Recovery, error) {
	now := s.Now()
	switch {
	case o.Since.IsZero():
		return Recovery{}, errors.New("ledger: recovery needs the time since which changes may be lost")
	case o.Since.After(now):
		return Recovery{}, fmt.Errorf("%w: %s is after now (%s): nothing can have changed after it",
			ErrRecoverySinceInFuture, o.Since.UTC().Format(time.RFC3339), now.Format(time.RFC3339))
	case o.Margin < 0:
		return Recovery{}, fmt.Errorf("ledger: recovery margin %s is negative", o.Margin)
	}
	margin := cmp.Or(o.Margin, DefaultRecoveryMargin)
	batch := cmp.Or(o.Batch, DefaultRecoveryBatch)
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := Recovery{DryRun: o.DryRun, Since: o.Since.UTC(), From: o.Since.Add(-margin).UTC(), Moved: map[Status]int{}}
	if err := s.pool.QueryRow(ctx, operationsOldest).Scan(&r.Oldest); err != nil {
		return r, fmt.Errorf("recover: read the oldest operation: %w", err)
	}
	var leftProviders []string
	if err := s.pool.QueryRow(ctx, operationsLeftInWindow, pgx.StrictNamedArgs{"from": r.From}).Scan(&r.AlreadyUnknown, &r.InReview, &leftProviders); err != nil {
		return r, fmt.Errorf("recover: count the window's unknown and review operations: %w", err)
	}
	providers := map[string]bool{}
	for _, p := range leftProviders {
		providers[p] = true
	}
	if err := s.pool.QueryRow(ctx, pausesLedgerBehindCount).Scan(&r.Detected, &r.PausesKept); err != nil {
		return r, fmt.Errorf("recover: count ledger_behind pauses: %w", err)
	}
	if !o.DryRun {
		detail := fmt.Sprintf("recovery of the changes since %s under way (actledger recover)", r.From.Format(time.RFC3339))
		if _, err := s.pool.Exec(ctx, pausesInsertRecovery, pgx.StrictNamedArgs{"now": s.nowArg(), "detail": detail}); err != nil {
			return r, fmt.Errorf("recover: pause dispatch while recovering: %w", err)
		}
	}
	for _, st := range recoverableStates {
		if err := s.recoverState(ctx, st, batch, log, &r, providers); err != nil {
			r.Providers = sortedKeys(providers)
			return r, fmt.Errorf("recover: %d operation(s) moved in %d batch(es), dispatch stays paused (%s); run the same recovery again to finish: %w",
				r.Total(), r.Batches, PauseLedgerBehind, err)
		}
	}
	r.Providers = sortedKeys(providers)
	if o.DryRun {
		return r, nil
	}
	if err := s.liftLedgerBehind(ctx, &r); err != nil {
		return r, fmt.Errorf("recover: every operation of the window was moved, then lifting the %s pauses failed (run the same recovery again): %w", PauseLedgerBehind, err)
	}
	log.InfoContext(ctx, "recovery done", "moved", r.Total(), "batches", r.Batches, "tenants_resumed", r.Resumed,
		"pauses_kept", r.PausesKept, "released", r.Released)
	return r, nil
}

// recoverState walks the window's operations in state st, a page of batch
// at a time, and moves each page in one transaction (a dry run only
// counts). A page is counted once its transaction committed.
func (s *Store) recoverState(ctx context.Context, st Status, batch int, log *slog.Logger, r *Recovery, providers map[string]bool) error {
	var afterAt *time.Time
	var afterID uuid.UUID
	for {
		var page, moved []recoverable
		var live, stale int
		work := func(db DBTX, tx *Tx) error {
			page, moved, live, stale = nil, nil, 0, 0
			rows, _ := db.Query(ctx, operationsRecoverable[st], pgx.StrictNamedArgs{
				"from": r.From, "now": s.nowArg(), "after_at": afterAt, "after_id": afterID, "limit": batch,
			})
			var err error
			if page, err = pgx.CollectRows(rows, pgx.RowToStructByName[recoverable]); err != nil {
				return fmt.Errorf("find the window's %s operations: %w", st, err)
			}
			for _, op := range page {
				if op.Status == StatusDispatching && !op.LeaseExpired {
					live++
					continue
				}
				if tx != nil {
					err := s.recoverOne(ctx, tx, op, r)
					if errors.Is(err, ErrStale) {
						stale++
						continue
					}
					if err != nil {
						return err
					}
				}
				moved = append(moved, op)
			}
			return nil
		}
		var err error
		if r.DryRun {
			err = work(s.pool, nil)
		} else {
			err = s.InTx(ctx, func(tx *Tx) error { return work(tx.tx, tx) })
		}
		if err != nil {
			return err
		}
		r.Moved[st] += len(moved)
		r.LiveLease += live
		r.MovedMeanwhile += stale
		if len(moved) > 0 {
			r.Batches++
			for _, op := range moved {
				providers[op.Provider] = true
				if len(r.Sample) < RecoverySampleSize {
					r.Sample = append(r.Sample, op.ID)
				}
			}
			msg := "recovery batch committed"
			if r.DryRun {
				msg = "recovery batch counted (dry run)"
			}
			log.InfoContext(ctx, msg, "status", st, "moved", len(moved), "moved_total", r.Total())
		}
		if len(page) < batch {
			return nil
		}
		last := page[len(page)-1]
		afterAt, afterID = &last.UpdatedAt, last.ID
	}
}

// recoverOne makes op unknown in tx: settled by a resend under its key, a
// lookup or a person, never a new create. Its first possible send is its
// last recorded change, its last possible send now; its next step is due
// now. A dispatching operation moves only while its lease has expired,
// judged in the statement (a worker that has just extended it keeps it).
func (s *Store) recoverOne(ctx context.Context, tx *Tx, op recoverable, r *Recovery) error {
	now := s.Now()
	_, err := s.TransitionTx(ctx, tx, Change{
		ID: op.ID, From: op.Status, Version: op.Version, To: StatusUnknown,
		Kind: EventLedgerRecovery, Actor: recoveryActor,
		OnlyIfLeaseExpired: op.Status == StatusDispatching,
		NextAttemptAt:      now, SentFrom: op.UpdatedAt, SentAt: now,
		Detail: map[string]any{
			"was": op.Status, "since": r.Since, "from": r.From,
			"why": "the ledger lost its latest changes (a failover to an asynchronous replica, a restore) and the ledger it lost may have sent this operation: it is settled by a resend under its key, a lookup, a statement or a person before any new create",
		},
	})
	return err
}

// liftLedgerBehind removes the ledger_behind pauses actledger made, gives
// the operators' pauses that took the reason their own meaning back, and
// releases each lifted tenant's waiting work (as a resume does).
func (s *Store) liftLedgerBehind(ctx context.Context, r *Recovery) error {
	var tenants []uuid.UUID
	err := s.InTx(ctx, func(tx *Tx) error {
		rows, _ := tx.tx.Query(ctx, pausesDeleteLedgerBehind)
		var err error
		if tenants, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID]); err != nil {
			return fmt.Errorf("lift ledger_behind pauses: %w", err)
		}
		tag, err := tx.tx.Exec(ctx, pausesClearLedgerBehind)
		if err != nil {
			return fmt.Errorf("clear ledger_behind from operators' pauses: %w", err)
		}
		r.Resumed, r.PausesKept = len(tenants), int(tag.RowsAffected())
		return nil
	})
	if err != nil {
		return err
	}
	for _, tenant := range tenants {
		n, err := s.releaseWaiting(ctx, tenant, "", "", nil)
		r.Released += n
		if err != nil {
			return fmt.Errorf("release tenant %s's waiting work: %w", tenant, err)
		}
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
