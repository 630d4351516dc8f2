package ledger

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/actledger/actledger/tracing"
)

// DBTX is the smallest executor the ledger needs; both *pgxpool.Pool and
// pgx.Tx satisfy it, so callers can include ledger writes in their own
// transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var (
	_ DBTX = (*pgxpool.Pool)(nil)
	_ DBTX = (pgx.Tx)(nil)
)

// Errors callers branch on.
var (
	// ErrNotFound: no such object in this tenant. Another tenant's object
	// answers the same, so its existence is never revealed.
	ErrNotFound = errors.New("ledger: not found")
	// ErrKeyConflict: the key is already used for the same action with
	// different params. Enqueue and Propose return it as a
	// *KeyConflictError, which names the existing operation.
	ErrKeyConflict = errors.New("ledger: key reused with different params")
	// ErrStale: the operation changed since it was read (its version or
	// status no longer match), so the conditional update did nothing.
	ErrStale = errors.New("ledger: stale operation version")
	// ErrBadTransition: the transition table does not allow the move.
	ErrBadTransition = errors.New("ledger: transition not allowed")
)

// KeyConflictError is ErrKeyConflict with the operation that holds the
// key: the answer names it (its id, status and summary), so an agent that
// meant the same intention learns where it stands, and one that meant
// another learns that this key is taken.
type KeyConflictError struct {
	Existing Operation
}

func (e *KeyConflictError) Error() string {
	return fmt.Sprintf("%v: %s/%s is operation %s (%s)", ErrKeyConflict, e.Existing.Action, e.Existing.Key, e.Existing.ID, e.Existing.Status)
}

// Unwrap makes errors.Is(err, ErrKeyConflict) hold.
func (e *KeyConflictError) Unwrap() error { return ErrKeyConflict }

// Operation is one approved intention and everything the ledger knows about
// its outcome.
type Operation struct {
	ID                uuid.UUID       `db:"id"`
	TenantID          uuid.UUID       `db:"tenant_id"`
	Tenant            string          `db:"tenant"`
	Action            string          `db:"action"`
	Key               string          `db:"key"`
	Provider          string          `db:"provider"`
	Params            json.RawMessage `db:"params"`
	ParamsFingerprint string          `db:"params_fingerprint"`
	ApprovalID        uuid.UUID       `db:"approval_id"`
	RequestedBy       uuid.UUID       `db:"requested_by"`
	ExternalKey       string          `db:"external_key"`
	Status            Status          `db:"status"`
	Version           int64           `db:"version"`
	Attempts          int             `db:"attempts"`
	RetryBase         int             `db:"retry_base"`
	RetrySince        *time.Time      `db:"retry_since"`
	LeaseOwner        *string         `db:"lease_owner"`
	LeaseExpiresAt    *time.Time      `db:"lease_expires_at"`
	NextAttemptAt     *time.Time      `db:"next_attempt_at"`
	FirstSentAt       *time.Time      `db:"first_sent_at"`
	LastSentAt        *time.Time      `db:"last_sent_at"`
	ProviderReference *string         `db:"provider_reference"`
	ReviewReason      *ReviewReason   `db:"review_reason"`
	ReviewOwner       *string         `db:"review_owner"`
	ReviewDeadline    *time.Time      `db:"review_deadline"`
	Flags             []string        `db:"flags"`
	RequestReason     *string         `db:"request_reason"`
	RequestExpiresAt  *time.Time      `db:"request_expires_at"`
	DecisionReason    *string         `db:"decision_reason"`
	// ClientKey is the key the caller sent when the action derives Key
	// from the params (a business key): kept for tracing, it decides
	// nothing. Nil when the caller sent none, or Key is the caller's.
	ClientKey *string `db:"client_key"`
	// Scope is the access scope of the token that requested or proposed
	// it (a compensation's: the operation's it compensates); nil for a
	// token of the whole tenant. Only callers it admits see it (Access).
	Scope *string `db:"scope"`
	// Traceparent is the W3C trace context of the request that enqueued
	// or proposed it (tracing.Traceparent), which its later steps join;
	// nil when tracing was off. It decides nothing.
	Traceparent *string `db:"traceparent"`
	// ApprovedBy names who granted the approval the operation consumed:
	// "person:<email or subject>", "approver:<token name>" or
	// "policy:<version>" (approvedBy); nil while a proposal waits.
	ApprovedBy *string   `db:"approved_by"`
	CreatedAt  time.Time `db:"created_at"`
	UpdatedAt  time.Time `db:"updated_at"`
}

// Event is one entry of an operation's append-only history.
type Event struct {
	Seq    int64           `db:"seq"`
	At     time.Time       `db:"at"`
	Kind   EventKind       `db:"kind"`
	From   *Status         `db:"from_status"`
	To     Status          `db:"to_status"`
	Actor  string          `db:"actor"`
	Detail json.RawMessage `db:"detail"`
}

// Config configures a Store.
type Config struct {
	// Now, when set, is the clock for every timestamp the store writes.
	// Tests use it to control time; nil means the database's now().
	Now func() time.Time
	// Subjects names the subjects of the outbox rows the store writes:
	// dispatch messages, evidence messages and review announcements (every
	// transition into review writes one in the same statement). Required
	// for writes that need a message (they return ErrNoSubjects without
	// it); a store for reads and token commands may leave it nil.
	Subjects Subjects
	// OutboxCommitted, when set, is called after a commit that added
	// outbox rows due now (outbox.Notifier.Signal), so relays publish them
	// at once instead of at their next poll.
	OutboxCommitted func()
	// ResumeBatch is how many operations a resume releases per
	// transaction. Default DefaultResumeBatch.
	ResumeBatch int
	// TracerProvider makes the enqueue's span, whose context the operation
	// and its outbox rows keep. Default: otel's global provider.
	TracerProvider trace.TracerProvider
}

// Store reads and writes the ledger.
type Store struct {
	resumeBatch     int
	pool            *pgxpool.Pool
	now             func() time.Time
	subjects        Subjects
	outboxCommitted func()
	tracer          trace.Tracer
	group           *groupCommit
	// transitions is the writeSet of Claim and Record: the changes of a
	// shared batch go out as one operationTransitions statement.
	transitions *writeSet
	// enqueues is the writeSet of Enqueue (see queueEnqueues).
	enqueues *writeSet
	// notifying: SyncReceivers stored receivers, so settling changes may
	// write notifications, and relays are woken after their commit.
	notifying atomic.Bool
}

// New returns a Store over pool.
func New(pool *pgxpool.Pool, cfg Config) *Store {
	s := &Store{resumeBatch: cmp.Or(cfg.ResumeBatch, DefaultResumeBatch), pool: pool, now: cfg.Now, subjects: cfg.Subjects, outboxCommitted: cfg.OutboxCommitted,
		tracer: tracing.Tracer(cfg.TracerProvider), group: &groupCommit{pool: pool}}
	s.transitions = &writeSet{queue: s.queueTransitions}
	s.enqueues = &writeSet{queue: s.queueEnqueues}
	return s
}

// nowArg is the clock parameter every query takes as
// coalesce($n::timestamptz, now()).
func (s *Store) nowArg() *time.Time {
	if s.now == nil {
		return nil
	}
	t := s.now().UTC()
	return &t
}

// Now returns the store's notion of the current time (the injected clock, or
// the local clock, which Postgres shares on one machine).
func (s *Store) Now() time.Time {
	if s.now != nil {
		return s.now().UTC()
	}
	return time.Now().UTC()
}

const operationColumns = `o.id, o.tenant_id, t.name AS tenant, o.action, o.key, o.provider, o.params,
    o.params_fingerprint, o.approval_id, o.requested_by, o.external_key, o.status, o.version,
    o.attempts, o.retry_base, o.retry_since, o.lease_owner, o.lease_expires_at, o.next_attempt_at, o.first_sent_at,
    o.last_sent_at, o.provider_reference, o.review_reason, o.review_owner, o.review_deadline,
    o.flags, o.created_at, o.updated_at, o.request_reason, o.request_expires_at, o.decision_reason, o.client_key, o.scope,
    o.traceparent, ` + approvedByColumn

// approvedByColumn is the SQL of who granted the approval of the
// operation row o (its approval_id): the decider a proposal's approval
// names ("person:…", "policy:…"), else the approver token's name. The one
// spelling of approved_by, for every read of an operation, a transition's
// result, an enqueue's and a notification's.
const approvedByColumn = `(SELECT coalesce(a.approver, 'approver:' || k.name) FROM approvals a
     LEFT JOIN api_tokens k ON k.id = a.approver_token_id WHERE a.id = o.approval_id) AS approved_by`

// The reads of a request take its Access: the tenant, and scope_admits
// on the caller's scope ($3, @scope; NULL for the whole tenant).
const (
	operationGet = `SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.id = $1 AND o.tenant_id = $2 AND scope_admits($3, o.scope)`

	operationGetByKey = `SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.tenant_id = $1 AND o.action = $2 AND o.key = $3 AND scope_admits($4, o.scope)`

	// operationKeyTaken says whether any operation of the tenant holds
	// the key, whatever its scope: keys are unique per tenant.
	operationKeyTaken = `SELECT EXISTS (SELECT 1 FROM operations WHERE tenant_id = $1 AND action = $2 AND key = $3)`

	// operationGetAnyTenant is for internal workers, which act on ids
	// taken from the ledger's own messages.
	operationGetAnyTenant = `SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.id = $1`

	operationEvents = `SELECT ` + eventColumns + `
FROM operation_events e JOIN operations o ON o.id = e.operation_id
` + eventConflictCount + `
WHERE o.id = $1 AND o.tenant_id = $2
ORDER BY e.seq`

	// operationEventsPage is a page of operationEvents: the events after
	// seq $3, at most $4.
	operationEventsPage = `SELECT ` + eventColumns + `
FROM operation_events e JOIN operations o ON o.id = e.operation_id
` + eventConflictCount + `
WHERE o.id = $1 AND o.tenant_id = $2 AND e.seq > $3
ORDER BY e.seq
LIMIT $4`

	// eventAppend locks the operation's row FOR KEY SHARE, as every writer
	// of an event holds its operation's row: a prune of the operation
	// (which locks it FOR UPDATE) is waited for, and then leaves no row to
	// write an event for (schema 036).
	eventAppend = `INSERT INTO operation_events (operation_id, tenant_id, at, kind, from_status, to_status, actor, detail)
SELECT o.id, o.tenant_id, coalesce($2::timestamptz, now()), $3, o.status, o.status, $4, $5
FROM operations o WHERE o.id = $1
FOR KEY SHARE OF o`
)

func collectOperation(rows pgx.Rows) (Operation, error) {
	op, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Operation])
	if errors.Is(err, pgx.ErrNoRows) {
		return Operation{}, ErrNotFound
	}
	return op, err
}

// Get returns the operation id that in may see, or ErrNotFound (also
// for another tenant's or another scope's).
func (s *Store) Get(ctx context.Context, in Access, id uuid.UUID) (Operation, error) {
	rows, _ := s.pool.Query(ctx, operationGet, id, in.Tenant, in.scope())
	op, err := collectOperation(rows)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return op, fmt.Errorf("get operation %s: %w", id, err)
	}
	return op, err
}

// GetInternal returns an operation by id whatever its tenant. It is for
// workers that act on ids from the ledger's own messages, never for requests.
func (s *Store) GetInternal(ctx context.Context, id uuid.UUID) (Operation, error) {
	rows, _ := s.pool.Query(ctx, operationGetAnyTenant, id)
	op, err := collectOperation(rows)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return op, fmt.Errorf("get operation %s: %w", id, err)
	}
	return op, err
}

// GetByKey returns the operation for action and key that in may see.
func (s *Store) GetByKey(ctx context.Context, in Access, action, key string) (Operation, error) {
	return s.getByKey(ctx, s.pool, in, action, key)
}

func (s *Store) getByKey(ctx context.Context, db DBTX, in Access, action, key string) (Operation, error) {
	rows, _ := db.Query(ctx, operationGetByKey, in.Tenant, action, key, in.scope())
	op, err := collectOperation(rows)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return op, fmt.Errorf("get operation %s/%s: %w", action, key, err)
	}
	return op, err
}

// KeyTaken reports whether an operation of tenant holds key for action,
// in any scope: a business key is unique per tenant, so a key another
// scope holds is taken (and a request for it is refused with
// ErrKeyInUseElsewhere) though the caller may not see its operation.
func (s *Store) KeyTaken(ctx context.Context, tenant uuid.UUID, action, key string) (bool, error) {
	var taken bool
	if err := s.pool.QueryRow(ctx, operationKeyTaken, tenant, action, key).Scan(&taken); err != nil {
		return false, fmt.Errorf("look up key %s/%s: %w", action, key, err)
	}
	return taken, nil
}

// Events returns the history of operation id that in may see, oldest
// first. Get decides whether in may (an operation's scope never changes),
// so the history's query needs only the tenant.
func (s *Store) Events(ctx context.Context, in Access, id uuid.UUID) ([]Event, error) {
	if _, err := s.Get(ctx, in, id); err != nil {
		return nil, err
	}
	rows, _ := s.pool.Query(ctx, operationEvents, id, in.Tenant)
	events, err := pgx.CollectRows(rows, pgx.RowToStructByName[Event])
	if err != nil {
		return nil, fmt.Errorf("list events of %s: %w", id, err)
	}
	return events, nil
}

// EventsPage returns at most limit events of operation id that in may
// see, after seq afterSeq (0: from the first), oldest first, or
// ErrNotFound.
func (s *Store) EventsPage(ctx context.Context, in Access, id uuid.UUID, afterSeq int64, limit int) ([]Event, error) {
	if _, err := s.Get(ctx, in, id); err != nil {
		return nil, err
	}
	rows, _ := s.pool.Query(ctx, operationEventsPage, id, in.Tenant, afterSeq, limit)
	events, err := pgx.CollectRows(rows, pgx.RowToStructByName[Event])
	if err != nil {
		return nil, fmt.Errorf("list events of %s: %w", id, err)
	}
	return events, nil
}

// AppendEvent records something that happened to an operation without
// changing its state: a conflicting request, a stale worker's late answer,
// evidence that needs no transition.
func (s *Store) AppendEvent(ctx context.Context, id uuid.UUID, kind EventKind, actor string, detail any) error {
	return s.appendEvent(ctx, s.pool, id, kind, actor, detail)
}

// AppendEventTx is AppendEvent inside the caller's ledger transaction tx.
func (s *Store) AppendEventTx(ctx context.Context, tx *Tx, id uuid.UUID, kind EventKind, actor string, detail any) error {
	return s.appendEvent(ctx, tx.tx, id, kind, actor, detail)
}

func (s *Store) appendEvent(ctx context.Context, db DBTX, id uuid.UUID, kind EventKind, actor string, detail any) error {
	body, err := marshalDetail(detail)
	if err != nil {
		return err
	}
	tag, err := db.Exec(ctx, eventAppend, id, s.nowArg(), kind, actor, body)
	if err != nil {
		return fmt.Errorf("append %s event to %s: %w", kind, id, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

func marshalDetail(detail any) ([]byte, error) {
	if detail == nil {
		return []byte("{}"), nil
	}
	if raw, ok := detail.(json.RawMessage); ok {
		return raw, nil
	}
	body, err := json.Marshal(utcTimes(detail))
	if err != nil {
		return nil, fmt.Errorf("encode event detail: %w", err)
	}
	return body, nil
}

// utcTimes returns detail with its times in UTC, as the contract shows
// every time: a detail's times come from pgx (which reads timestamptz in
// the process's local zone) and from local clocks. Details are flat maps,
// so only their values are looked at; the caller's map is never changed.
func utcTimes(detail any) any {
	m, ok := detail.(map[string]any)
	if !ok {
		return detail
	}
	var out map[string]any
	for k, v := range m {
		var utc any
		switch t := v.(type) {
		case time.Time:
			if t.Location() != time.UTC {
				utc = t.UTC()
			}
		case *time.Time:
			if t != nil && t.Location() != time.UTC {
				u := t.UTC()
				utc = &u
			}
		}
		if utc == nil {
			continue
		}
		if out == nil {
			out = maps.Clone(m)
		}
		out[k] = utc
	}
	if out == nil {
		return detail
	}
	return out
}

// Unavailable reports whether err means Postgres could not be reached,
// went away mid-request or gave up, rather than a bug: callers answer 503 or
// try again later.
func Unavailable(err error) bool {
	var pgErr *pgconn.PgError
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		// A connection lost mid-request: the outcome of a write is unknown
		// to this request, and a retry with the same key replays it.
		return true
	case errors.As(err, &connectErr), errors.As(err, &netErr), pgconn.Timeout(err):
		return true
	case errors.As(err, &pgErr):
		// 08: connection exception; 53: insufficient resources;
		// 57P0x: the server is shutting down or restarting.
		c := pgErr.Code
		return c[:2] == "08" || c[:2] == "53" || c == "57P01" || c == "57P02" || c == "57P03"
	}
	return pgconn.SafeToRetry(err)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
