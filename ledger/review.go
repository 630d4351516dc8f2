package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/tracing"
)

const (
	// operationGetByExternalKey reads the operation whose external key is
	// @key: a derived key (schema 041) by operations_external_key_idx,
	// whose predicate the first branch repeats; a key made before it,
	// 'al_' || id, by the id it spells (@id, NULL when it spells none).
	// One key is one operation (the index is UNIQUE, and a key 'al_' ||
	// id is either that operation's or, inherited through a tombstone,
	// in the index), so LIMIT 1 only stops the second branch once the
	// first found it.
	operationGetByExternalKey = `(SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.external_key = @key AND o.external_key <> 'al_' || o.id::text)
UNION ALL
(SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.id = @id::uuid AND o.external_key = @key)
LIMIT 1`

	// operationsInReview is a page of the operations in review the caller
	// ($1, $5) may see, longest waiting first, after position ($2, $3)
	// when $2 is set.
	operationsInReview = `SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.tenant_id = $1 AND scope_admits($5, o.scope) AND o.status = 'review'
  AND ($2::timestamptz IS NULL OR (o.updated_at, o.id) > ($2, $3))
ORDER BY o.updated_at, o.id
LIMIT $4`

	// operationEventsOf is the history of each of the operations $1 the
	// caller ($2, $3) may see, in one query (a review page judges every
	// item's history).
	operationEventsOf = `SELECT e.operation_id, e.seq, e.at, e.kind, e.from_status, e.to_status, e.actor, e.detail
FROM operation_events e JOIN operations o ON o.id = e.operation_id
WHERE e.operation_id = ANY ($1) AND o.tenant_id = $2 AND scope_admits($3, o.scope)
ORDER BY e.operation_id, e.seq`

	// operationLapses is operationLapse (CheckLapse) for each of the
	// operations $1, in one query.
	operationLapses = `SELECT o.id, operation_lapse(a, k, coalesce($2::timestamptz, now()), NULL, NULL)
FROM operations o
JOIN approvals a ON a.id = o.approval_id
JOIN api_tokens k ON k.id = o.requested_by
WHERE o.id = ANY ($1)`
)

// Position is where a page of operations ended: the last one's time (of
// the list's order) and id. Pages are keyset pages: an item that changes
// while a client pages moves later (its time only grows), so it may be
// listed twice but is never skipped.
type Position struct {
	At time.Time
	ID uuid.UUID
}

// args are the query parameters of p; a nil p starts from the beginning.
func (p *Position) args() (*time.Time, uuid.UUID) {
	if p == nil {
		return nil, uuid.Nil
	}
	return &p.At, p.ID
}

// GetByExternalKey returns the operation whose external key is key, whatever
// its tenant: evidence from a provider names only the key. Internal use.
func (s *Store) GetByExternalKey(ctx context.Context, key string) (Operation, error) {
	var id *uuid.UUID
	if v, ok := operationIDOf(key); ok {
		id = &v
	}
	rows, _ := s.pool.Query(ctx, operationGetByExternalKey, pgx.StrictNamedArgs{"key": key, "id": id})
	op, err := collectOperation(rows)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return op, fmt.Errorf("get operation by external key: %w", err)
	}
	return op, err
}

// InReview lists at most limit of the operations waiting for a person
// that in may see, longest waiting first, after position after (nil: from
// the first).
func (s *Store) InReview(ctx context.Context, in Access, after *Position, limit int) ([]Operation, error) {
	at, id := after.args()
	rows, _ := s.pool.Query(ctx, operationsInReview, in.Tenant, at, id, limit, in.scope())
	ops, err := pgx.CollectRows(rows, pgx.RowToStructByName[Operation])
	if err != nil {
		return nil, fmt.Errorf("list review items: %w", err)
	}
	return ops, nil
}

// EventsOf returns the history of each of the operations ids that in may
// see, oldest first, in one query.
func (s *Store) EventsOf(ctx context.Context, in Access, ids []uuid.UUID) (map[uuid.UUID][]Event, error) {
	type row struct {
		OperationID uuid.UUID `db:"operation_id"`
		Event
	}
	rows, _ := s.pool.Query(ctx, operationEventsOf, ids, in.Tenant, in.scope())
	all, err := pgx.CollectRows(rows, pgx.RowToStructByName[row])
	if err != nil {
		return nil, fmt.Errorf("list events of %d operations: %w", len(ids), err)
	}
	out := make(map[uuid.UUID][]Event, len(ids))
	for _, r := range all {
		out[r.OperationID] = append(out[r.OperationID], r.Event)
	}
	return out, nil
}

// Lapses is CheckLapse for each of the operations ids, in one query.
func (s *Store) Lapses(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]Lapse, error) {
	rows, _ := s.pool.Query(ctx, operationLapses, ids, s.nowArg())
	out := make(map[uuid.UUID]Lapse, len(ids))
	var id uuid.UUID
	var lapse Lapse
	_, err := pgx.ForEachRow(rows, []any{&id, &lapse}, func() error {
		out[id] = lapse
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("check approvals of %d operations: %w", len(ids), err)
	}
	return out, nil
}

// Unmatched is evidence of an effect that no operation explains: a review
// item of its own.
type Unmatched struct {
	ID                int64           `db:"id"`
	TenantID          *uuid.UUID      `db:"tenant_id"`
	Provider          string          `db:"provider"`
	Source            string          `db:"source"`
	Reference         string          `db:"reference"`
	ProviderReference *string         `db:"provider_reference"`
	Status            EvidenceStatus  `db:"status"`
	Detail            json.RawMessage `db:"detail"`
	Owner             string          `db:"owner"`
	Deadline          time.Time       `db:"deadline"`
	CreatedAt         time.Time       `db:"created_at"`
}

const (
	unmatchedColumns = `id, tenant_id, provider, source, reference, provider_reference, status, detail, owner, deadline, created_at`

	unmatchedInsert = `INSERT INTO unmatched_evidence (tenant_id, provider, source, reference, provider_reference,
    status, detail, owner, deadline, created_at)
VALUES (@tenant, @provider, @source, @reference, @provider_reference, @status, @detail, @owner, @deadline, coalesce(@now::timestamptz, now()))
ON CONFLICT (provider, source) DO NOTHING
RETURNING ` + unmatchedColumns

	// unmatchedOpen lists the open items a tenant's operators see: their
	// own only. Evidence no tenant owns (tenant_id NULL) is shown to
	// nobody: it must never cross tenants. Evidence has no scope (it
	// matches no operation, so it may be any department's effect):
	// scope_admits shows it to operators of the whole tenant only. A page:
	// after position ($2, $3) when $2 is set, at most $4; $5 is the
	// caller's scope.
	unmatchedOpen = `SELECT ` + unmatchedColumns + ` FROM unmatched_evidence
WHERE resolved_at IS NULL AND tenant_id = $1 AND scope_admits($5, NULL)
  AND ($2::timestamptz IS NULL OR (created_at, id) > ($2, $3))
ORDER BY created_at, id
LIMIT $4`

	unmatchedResolve = `UPDATE unmatched_evidence
SET resolved_at = coalesce($4::timestamptz, now()), resolved_by = $3, resolution_note = $5
WHERE id = $1 AND resolved_at IS NULL AND tenant_id = $2 AND scope_admits($6, NULL)`

	unmatchedOwned = `SELECT EXISTS (SELECT 1 FROM unmatched_evidence WHERE id = $1 AND tenant_id = $2 AND scope_admits($3, NULL))`
)

// RecordUnmatched stores u (once per provider and source) and announces it
// on the review stream in the same transaction, on the subject of its
// tenant's id. tenant is the tenant's name, for people reading the
// announcement.
func (s *Store) RecordUnmatched(ctx context.Context, u Unmatched, tenant string) (recorded bool, err error) {
	detail := u.Detail
	if len(detail) == 0 {
		detail = json.RawMessage("{}")
	}
	prefix := s.reviewSubjectPrefix()
	err = s.InTx(ctx, func(tx *Tx) error {
		rows, _ := tx.tx.Query(ctx, unmatchedInsert, pgx.StrictNamedArgs{
			"tenant": u.TenantID, "provider": u.Provider, "source": u.Source, "reference": u.Reference,
			"provider_reference": u.ProviderReference, "status": u.Status, "detail": detail,
			"owner": u.Owner, "deadline": u.Deadline, "now": s.nowArg(),
		})
		got, err := pgx.CollectRows(rows, pgx.RowToStructByName[Unmatched])
		if err != nil {
			return fmt.Errorf("record unmatched evidence: %w", err)
		}
		if len(got) == 0 {
			return nil
		}
		recorded = true
		if err := s.notifyEvidence(ctx, tx, got[0].ID); err != nil {
			return err
		}
		if prefix == "" {
			return nil
		}
		deadline := u.Deadline
		payload, err := json.Marshal(ReviewAnnouncement{
			EvidenceID: &got[0].ID, Tenant: tenant, Provider: u.Provider, Reason: ReasonUnmatchedEvidence,
			Reference: u.Reference, ProviderReference: u.ProviderReference, Owner: u.Owner, Deadline: &deadline,
		})
		if err != nil {
			return fmt.Errorf("encode review announcement: %w", err)
		}
		return s.insertOutbox(ctx, tx, OutboxMessage{
			Subject: ReviewSubject(prefix, u.TenantID, string(ReasonUnmatchedEvidence)),
			MsgID:   fmt.Sprintf("review.unmatched.%d", got[0].ID), Payload: payload,
			Traceparent: tracing.Traceparent(ctx),
		})
	})
	return recorded, err
}

// EvidencePosition is where a page of unmatched evidence ended: the last
// item's created_at and id.
type EvidencePosition struct {
	At time.Time
	ID int64
}

// OpenUnmatched lists at most limit of the unmatched evidence in may see
// (none with a scope), oldest first, after position after (nil: from the
// first).
func (s *Store) OpenUnmatched(ctx context.Context, in Access, after *EvidencePosition, limit int) ([]Unmatched, error) {
	var at *time.Time
	var id int64
	if after != nil {
		at, id = &after.At, after.ID
	}
	rows, _ := s.pool.Query(ctx, unmatchedOpen, in.Tenant, at, id, limit, in.scope())
	items, err := pgx.CollectRows(rows, pgx.RowToStructByName[Unmatched])
	if err != nil {
		return nil, fmt.Errorf("list unmatched evidence: %w", err)
	}
	return items, nil
}

// UnmatchedOwnedBy reports whether in may see unmatched evidence id: it
// is in's tenant's, and in is the whole tenant.
func (s *Store) UnmatchedOwnedBy(ctx context.Context, in Access, id int64) (bool, error) {
	var owned bool
	if err := s.pool.QueryRow(ctx, unmatchedOwned, id, in.Tenant, in.scope()).Scan(&owned); err != nil {
		return false, fmt.Errorf("owner of unmatched evidence %d: %w", id, err)
	}
	return owned, nil
}

// ResolveUnmatched closes an unmatched evidence item in may see with an
// operator's note, or returns ErrNotFound.
func (s *Store) ResolveUnmatched(ctx context.Context, in Access, id int64, actor, note string) error {
	tag, err := s.pool.Exec(ctx, unmatchedResolve, id, in.Tenant, actor, s.nowArg(), note, in.scope())
	if err != nil {
		return fmt.Errorf("resolve unmatched evidence %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}
