package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/actledger/actledger/outbox"
)

// EnqueueRequest is an agent's request to carry out an approved action.
type EnqueueRequest struct {
	TenantID   uuid.UUID
	TokenID    uuid.UUID // the agent token that asked; revoking it holds unsent work
	Actor      string    // names the asker in events, e.g. "agent:<token name>"
	Action     string
	Key        string // caller's business reference; empty means the approval's id
	Provider   string // the provider the action maps to
	Params     []byte // any JSON object; canonicalised here
	ApprovalID uuid.UUID
}

// Dispatch is the message the outbox carries for an operation that is ready
// to be sent. The dispatcher reads everything else from the ledger.
type Dispatch struct {
	OperationID uuid.UUID `json:"operation_id"`
	Version     int64     `json:"version"`
}

// DispatchMsgID is the Nats-Msg-Id of the dispatch message for an operation
// at version: republishing the same row is deduplicated, while a later
// deliberate re-publish (at a newer version) is not.
func DispatchMsgID(id uuid.UUID, version int64) string {
	return fmt.Sprintf("dispatch.%s.%d", id, version)
}

// DispatchOutbox is the outbox message that hands operation id at version
// to a dispatcher, at due (zero: now).
func DispatchOutbox(subject string, id uuid.UUID, version int64, due time.Time) outbox.Message {
	payload, _ := json.Marshal(Dispatch{OperationID: id, Version: version})
	return outbox.Message{Subject: subject, MsgID: DispatchMsgID(id, version), Payload: payload, DeliverAfter: due}
}

// RedispatchOutbox is DispatchOutbox for a deliberate re-publish of the same
// version (a resume, a sweep of a lost message): its Nats-Msg-Id is new, so
// JetStream's duplicate window does not swallow it.
func RedispatchOutbox(subject string, id uuid.UUID, version int64, at time.Time) outbox.Message {
	m := DispatchOutbox(subject, id, version, time.Time{})
	m.MsgID = fmt.Sprintf("%s.r%d", m.MsgID, at.UnixNano())
	return m
}

// ExternalKey is the stable key sent to the provider for operation id, in
// the idempotency header and in the reference param. It never changes,
// whatever happens to the operation.
func ExternalKey(id uuid.UUID) string {
	return "al_" + id.String()
}

// operationEnqueue runs schema/004_enqueue.sql's enqueue_operation: the
// whole enqueue transaction in one round trip.
const operationEnqueue = `SELECT created, created_at, tenant FROM enqueue_operation(
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`

// approvalRefused is the SQLSTATE enqueue_operation raises when the approval
// does not authorise the operation; the message is the ApprovalCode.
const approvalRefused = "AL403"

// Enqueue stores a new operation with its created event and its outbox
// message, consuming one use of the approval, all in one transaction.
//
// A request whose (tenant, action, key) exists already is a replay: with the
// same canonical params it returns the current operation and replayed=true;
// with other params it records a conflict event and returns ErrKeyConflict
// (with the existing operation). Approval problems return *ApprovalError.
// The unique key makes concurrent identical requests converge on one
// operation: INSERT … ON CONFLICT waits for the first inserter to commit.
func (s *Store) Enqueue(ctx context.Context, req EnqueueRequest, subject string) (op Operation, replayed bool, err error) {
	canonical, fingerprint, err := Canonicalize(req.Params)
	if err != nil {
		return Operation{}, false, err
	}
	if req.Key == "" {
		if req.ApprovalID == uuid.Nil {
			return Operation{}, false, &ApprovalError{Code: ApprovalMismatch, Reason: "no approval given"}
		}
		req.Key = req.ApprovalID.String()
	}
	if req.Actor == "" {
		req.Actor = "token:" + req.TokenID.String()
	}
	id := uuid.Must(uuid.NewV7())
	msg := DispatchOutbox(subject, id, 1, time.Time{})
	var created bool
	var createdAt *time.Time
	var tenant *string
	// Concurrent enqueues share round trips and commits; ordering them by
	// their unique key keeps two shared transactions from deadlocking on it.
	order := uuid.NewSHA1(req.TenantID, []byte(req.Action+"\x00"+req.Key))
	err = s.group.do(ctx, order, func(b *pgx.Batch) {
		b.Queue(operationEnqueue, id, req.TenantID, req.Action, req.Key, req.Provider,
			canonical, fingerprint, req.ApprovalID, req.TokenID, ExternalKey(id), s.nowArg(),
			req.Actor, msg.Subject, msg.MsgID, msg.Payload).QueryRow(func(row pgx.Row) error {
			return row.Scan(&created, &createdAt, &tenant)
		})
	})
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == approvalRefused:
		return Operation{}, false, &ApprovalError{Code: ApprovalCode(pgErr.Message), Reason: pgErr.Detail}
	case isForeignKeyViolation(err, "operations_approval_id_fkey"):
		return Operation{}, false, &ApprovalError{Code: ApprovalMismatch, Reason: "no such approval"}
	case err != nil:
		return Operation{}, false, fmt.Errorf("enqueue operation: %w", err)
	case created:
		s.OutboxCommitted()
		return Operation{
			ID: id, TenantID: req.TenantID, Tenant: deref(tenant), Action: req.Action, Key: req.Key,
			Provider: req.Provider, Params: canonical, ParamsFingerprint: fingerprint,
			ApprovalID: req.ApprovalID, RequestedBy: req.TokenID, ExternalKey: ExternalKey(id),
			Status: StatusQueued, Version: 1, Flags: []string{}, CreatedAt: *createdAt, UpdatedAt: *createdAt,
		}, false, nil
	}

	// The key exists: the conflicting row is committed (ON CONFLICT waited
	// for it, or it was inserted by an earlier enqueue of the same shared
	// transaction, which has committed now), so this read sees it.
	op, err = s.GetByKey(ctx, req.TenantID, req.Action, req.Key)
	if err != nil {
		return Operation{}, false, err
	}
	if op.ParamsFingerprint == fingerprint {
		return op, true, nil
	}
	conflict := map[string]any{"params_fingerprint": fingerprint, "token_id": req.TokenID, "approval_id": req.ApprovalID}
	if err := s.AppendEvent(ctx, s.pool, op.ID, "key_conflict", req.Actor, conflict); err != nil {
		return op, false, err
	}
	return op, false, ErrKeyConflict
}
