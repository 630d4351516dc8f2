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

	"github.com/actledger/actledger/tracing"
)

// Errors of deciding a proposal, which callers branch on.
var (
	// ErrNotAwaitingApproval: the operation is not (or no longer) waiting
	// for a decision; someone else decided first, or it lapsed.
	ErrNotAwaitingApproval = errors.New("ledger: operation is not awaiting approval")
	// ErrFingerprintMismatch: the approver saw other params than the
	// operation holds, so what was seen is not what would be approved.
	ErrFingerprintMismatch = errors.New("ledger: params fingerprint does not match the proposal")
)

// ProposeRequest is an agent's proposal: an operation that waits for a
// person or a policy to approve it before anything is sent.
type ProposeRequest struct {
	TenantID uuid.UUID
	TokenID  uuid.UUID // the agent token that asked; revoking it holds the proposal
	Actor    string    // names the asker in events, e.g. "agent:<token name>"
	Action   string
	Key      string // caller's business reference, or the action's business key; required
	// ClientKey is the caller's key when Key is the action's business key
	// (derived from the params); kept for tracing, it decides nothing.
	ClientKey string
	// Scope is the asking token's access scope, which the proposal takes
	// (empty: the whole tenant's). A key held by an operation this scope
	// may not see is ErrKeyInUseElsewhere.
	Scope    string
	Provider string // the provider the action maps to
	Params   []byte // any JSON object; canonicalised here
	// Reason is the agent's one sentence for the approver; may be empty.
	Reason string
	// RequestTTL is how long the proposal may wait for a decision before
	// it is held.
	RequestTTL time.Duration
	// AutoApproval, when set, approves the new proposal at once, in the
	// transaction that stores it (the action's policy said yes). It is
	// ignored for a replay of an existing key.
	AutoApproval *Decision
}

// Decision is an approval of a proposal, by a person or a policy.
type Decision struct {
	// ApproverTokenID is the approver's token; uuid.Nil for a policy.
	ApproverTokenID uuid.UUID
	// Approver names who decided in the approval and the event:
	// "approver:<token name>" or "policy:<policy_version>".
	Approver string
	// Fingerprint is the params fingerprint the approver was shown; it
	// must be the operation's. Empty for a policy, which judged the params
	// it is stored with.
	Fingerprint   string
	PolicyVersion string
	// TTL is how long the approval stays valid for dispatch, from now.
	TTL time.Duration
	// Note is the approver's optional remark, kept on the approval.
	Note string
	// Target is the provider account and environment the operation's
	// provider points at as it is approved, which the approval is bound
	// to (see NewApproval.Target). Required.
	Target *Target
}

const (
	// operationPropose stores a proposal; ON CONFLICT waits for a
	// concurrent inserter of the same key, so identical concurrent
	// proposals converge on one operation.
	operationPropose = `WITH ins AS (
    INSERT INTO operations (id, tenant_id, action, key, provider, params, params_fingerprint,
        approval_id, requested_by, external_key, status, request_reason, request_expires_at,
        created_at, updated_at, client_key, scope, traceparent)
    VALUES (@id, @tenant, @action, @key, @provider, @params, @fingerprint,
        NULL, @token, @external_key, 'awaiting_approval', @reason,
        coalesce(@now::timestamptz, now()) + @request_ttl::bigint * interval '1 microsecond',
        coalesce(@now::timestamptz, now()), coalesce(@now::timestamptz, now()), @client_key, @scope, @traceparent)
    -- Every unique index is an arbiter, as in enqueue_operation.sql: with
    -- (tenant_id, action, key) alone, two identical proposals at once
    -- could each wait on the other, one in that index and one in
    -- operations_external_key_idx, and one failed with a deadlock.
    ON CONFLICT DO NOTHING
    RETURNING *
), ev AS (
    INSERT INTO operation_events (operation_id, tenant_id, at, kind, from_status, to_status, actor, detail)
    SELECT id, tenant_id, created_at, 'created', NULL, 'awaiting_approval', @actor, @detail FROM ins
), note AS (
    -- A proposal that waits for a person (@announce: no policy approves
    -- it in this transaction) is notified when a receiver of its tenant
    -- takes its state's event, @notify (approval.requested; NotifiedType
    -- in ledger/notification.go).
    INSERT INTO notifications (id, tenant_id, type, operation_id, status, at)
    SELECT gen_random_uuid(), i.tenant_id, @notify::text, i.id, i.status, i.created_at FROM ins i
    WHERE @announce::boolean
      AND EXISTS (SELECT 1 FROM notification_receivers r WHERE r.tenant_id = i.tenant_id AND @notify::text = ANY (r.events))
    RETURNING notifications.id, notifications.tenant_id, notifications.type
), note_out AS (
    ` + notificationOutbox + `
)
SELECT ` + operationColumns + `
FROM ins o JOIN tenants t ON t.id = o.tenant_id`

	// keyTombstoneReuse judges a new proposal's key against the
	// operations retention pruned under it (schema/functions/key_tombstone_reuse.sql).
	keyTombstoneReuse = `SELECT key_tombstone_reuse(@id, @tenant, @action, @key, @fingerprint, @scope)`

	// operationLockAwaiting reads an operation the caller may see and
	// locks it, so two decisions on one proposal take turns.
	operationLockAwaiting = `SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.id = @id AND o.tenant_id = @tenant AND scope_admits(@scope, o.scope)
FOR UPDATE OF o`

	// operationRequestLapsed says whether a proposal's request_ttl has run
	// out by now, by the clock the expiry sweep uses: past it the proposal
	// is held, whether or not the sweep has got to it yet.
	operationRequestLapsed = `SELECT coalesce(request_expires_at <= coalesce(@now::timestamptz, now()), false)
FROM operations WHERE id = @id`

	// approvalGrant creates an approval bound to one operation and uses
	// its only use at once. It takes the operation's scope: it serves that
	// operation alone, whoever (a person of the whole tenant, a policy)
	// granted it.
	approvalGrant = `INSERT INTO approvals (id, tenant_id, action, params, params_fingerprint,
    policy_version, approver_token_id, approver, operation_id, note, expires_at, max_uses, uses, created_at,
    account, environment, scope)
VALUES (@id, @tenant, @action, @params, @fingerprint, @policy_version, @approver_token, @approver,
    @operation, @note, coalesce(@now::timestamptz, now()) + @ttl::bigint * interval '1 microsecond',
    1, 1, coalesce(@now::timestamptz, now()), @account, @environment, @scope)
RETURNING ` + approvalColumns

	// operationsAwaitingPage is a page of the open proposals the caller
	// may see, oldest first, after the position (created_at, id) of the
	// previous page. A proposal past its request_ttl is no longer open (it
	// is held), even before the expiry sweep marks it.
	operationsAwaitingPage = `SELECT ` + operationColumns + `, k.name AS requested_by_name
FROM operations o JOIN tenants t ON t.id = o.tenant_id JOIN api_tokens k ON k.id = o.requested_by
WHERE o.tenant_id = @tenant AND scope_admits(@scope, o.scope) AND o.status = 'awaiting_approval'
  AND (o.request_expires_at IS NULL OR o.request_expires_at > coalesce(@now::timestamptz, now()))
  AND (@after_at::timestamptz IS NULL OR (o.created_at, o.id) > (@after_at::timestamptz, @after_id::uuid))
ORDER BY o.created_at, o.id
LIMIT @limit`

	// operationsRequestExpired are proposals nobody decided in time,
	// locked so a decision in flight finishes first; SKIP LOCKED lets two
	// sweepers share the work.
	operationsRequestExpired = `SELECT id, status, version FROM operations
WHERE status = 'awaiting_approval' AND request_expires_at <= coalesce(@now::timestamptz, now())
ORDER BY request_expires_at
LIMIT @limit
FOR UPDATE SKIP LOCKED`
)

// Propose stores a proposal in state awaiting_approval with its created
// event, and no approval and no outbox row, in one transaction; with
// req.AutoApproval it is approved in the same transaction (see Approve).
//
// Keys behave exactly as for Enqueue: a proposal whose (tenant, action,
// key) exists already is a replay with the same canonical params (the
// current operation, replayed=true) or a conflict with other params (a
// *KeyConflictError naming the existing operation, a conflict event
// recorded).
func (s *Store) Propose(ctx context.Context, req ProposeRequest) (op Operation, replayed bool, err error) {
	// A proposal is an enqueue too: its span is the request's child and
	// the parent of all that follows, as an approved operation's is.
	ctx, span := tracing.Start(ctx, s.tracer, "enqueue")
	defer func() { endEnqueueSpan(span, op, replayed, err) }()
	canonical, fingerprint, err := Canonicalize(req.Params)
	if err != nil {
		return Operation{}, false, err
	}
	if req.Key == "" {
		return Operation{}, false, errors.New("propose: a key is required")
	}
	if req.Actor == "" {
		req.Actor = "token:" + req.TokenID.String()
	}
	id := uuid.Must(uuid.NewV7())
	detail, err := json.Marshal(map[string]any{"params_fingerprint": fingerprint, "reason": req.Reason})
	if err != nil {
		return Operation{}, false, fmt.Errorf("encode event detail: %w", err)
	}
	created := false
	err = s.InTx(ctx, func(tx *Tx) error {
		created = false
		rows, _ := tx.tx.Query(ctx, operationPropose, pgx.StrictNamedArgs{
			"id": id, "tenant": req.TenantID, "action": req.Action, "key": req.Key, "provider": req.Provider,
			"params": canonical, "fingerprint": fingerprint, "token": req.TokenID, "external_key": ExternalKeyOf(req.TenantID, req.Action, req.Key),
			"reason": nullString(req.Reason), "request_ttl": req.RequestTTL.Microseconds(), "now": s.nowArg(),
			"actor": req.Actor, "detail": detail, "client_key": nullString(req.ClientKey), "scope": nullString(req.Scope),
			"traceparent": nullString(tracing.Traceparent(ctx)),
			"announce":    req.AutoApproval == nil, "notify": NotifiedType(StatusAwaitingApproval),
		})
		var err error
		op, err = collectOperation(rows)
		if errors.Is(err, ErrNotFound) {
			return nil // the key exists: a replay or a conflict, judged below
		}
		if err != nil {
			return fmt.Errorf("store proposal: %w", err)
		}
		// A key retention pruned: the tombstone's external key, or a
		// refusal (key_tombstone_reuse), judged after the insert.
		var reused *string
		if err := tx.tx.QueryRow(ctx, keyTombstoneReuse, pgx.StrictNamedArgs{
			"id": op.ID, "tenant": req.TenantID, "action": req.Action, "key": req.Key, "fingerprint": fingerprint,
			"scope": nullString(req.Scope),
		}).Scan(&reused); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == tombstoneRefused {
				return tombstoneError(pgErr, EnqueueRequest{Action: req.Action, Key: req.Key})
			}
			return fmt.Errorf("judge the key's tombstones: %w", err)
		}
		if reused != nil {
			op.ExternalKey = *reused
		}
		created = true
		tx.wroteOutbox = tx.wroteOutbox || (req.AutoApproval == nil && s.notifies(op))
		if req.AutoApproval != nil {
			op, _, err = s.approveTx(ctx, tx, op, *req.AutoApproval)
		}
		return err
	})
	switch {
	case err != nil:
		return Operation{}, false, err
	case created:
		return op, false, nil
	}
	// The existing key's row is committed (ON CONFLICT waited for it).
	return s.finishEnqueue(ctx, s.pool, &enqueueCall{
		req: EnqueueRequest{TenantID: req.TenantID, TokenID: req.TokenID, Actor: req.Actor, Action: req.Action, Key: req.Key,
			ClientKey: req.ClientKey, Scope: req.Scope},
		fingerprint: fingerprint,
	}, nil)
}

// Approve decides proposal id of tenant: in one transaction an approval
// bound to it (action, fingerprint, policy version, approver, expiry, one
// use) is created and used, the operation becomes queued and its dispatch
// message is written. It returns ErrNotFound (no such operation in the
// tenant), ErrNotAwaitingApproval (decided already, or lapsed: of two
// approvers deciding at once exactly one wins), ErrFingerprintMismatch
// (the approver saw other params; nothing changes) or ErrApproverRevoked
// (the approver's token was revoked meanwhile; nothing changes).
//
// decide makes the decision for the locked operation (its TTL and policy
// version may depend on its action).
//
// The tenant is in's, and a proposal in may not see (another access
// scope's) is ErrNotFound too, as a missing one.
func (s *Store) Approve(ctx context.Context, in Access, id uuid.UUID, decide func(Operation) Decision) (Operation, Approval, error) {
	var (
		op       Operation
		approval Approval
	)
	err := s.InTx(ctx, func(tx *Tx) error {
		locked, err := s.lockAwaiting(ctx, tx.tx, in, id)
		if err != nil {
			return err
		}
		d := decide(locked)
		if d.Fingerprint != locked.ParamsFingerprint {
			return fmt.Errorf("%w: the proposal's params are %s", ErrFingerprintMismatch, locked.ParamsFingerprint)
		}
		op, approval, err = s.approveTx(ctx, tx, locked, d)
		return err
	})
	if err != nil {
		return Operation{}, Approval{}, err
	}
	return op, approval, nil
}

// Deny declines proposal id, which in must see: it becomes cancelled,
// with reason in its event and its summary; nothing was sent and nothing
// will be. Errors as for Approve.
func (s *Store) Deny(ctx context.Context, in Access, id uuid.UUID, actor, reason string) (Operation, error) {
	var op Operation
	err := s.InTx(ctx, func(tx *Tx) error {
		locked, err := s.lockAwaiting(ctx, tx.tx, in, id)
		if err != nil {
			return err
		}
		op, err = s.TransitionTx(ctx, tx, Change{
			ID: locked.ID, From: StatusAwaitingApproval, Version: locked.Version, To: StatusCancelled,
			Kind: EventDenied, Actor: actor, Detail: map[string]string{"reason": reason}, Flag: FlagApprovalDenied,
			DecisionReason: reason,
		})
		return err
	})
	return op, err
}

// lockAwaiting reads and locks operation id, which in must see and which
// must be awaiting approval and within its request_ttl: a proposal past it
// is held (the expiry sweep marks it), so no decision may revive it.
func (s *Store) lockAwaiting(ctx context.Context, tx pgx.Tx, in Access, id uuid.UUID) (Operation, error) {
	rows, _ := tx.Query(ctx, operationLockAwaiting, pgx.StrictNamedArgs{"id": id, "tenant": in.Tenant, "scope": in.scope()})
	op, err := collectOperation(rows)
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			err = fmt.Errorf("lock operation %s: %w", id, err)
		}
		return Operation{}, err
	}
	if op.Status != StatusAwaitingApproval {
		return Operation{}, fmt.Errorf("%w: %s is %s", ErrNotAwaitingApproval, id, op.Status)
	}
	var lapsed bool
	if err := tx.QueryRow(ctx, operationRequestLapsed, pgx.StrictNamedArgs{"id": id, "now": s.nowArg()}).Scan(&lapsed); err != nil {
		return Operation{}, fmt.Errorf("lock operation %s: %w", id, err)
	}
	if lapsed {
		return Operation{}, fmt.Errorf("%w: %s is past its request_ttl", ErrNotAwaitingApproval, id)
	}
	return op, nil
}

// approveTx grants and uses an approval for op (awaiting approval, read
// in tx) and queues op with its dispatch message.
func (s *Store) approveTx(ctx context.Context, tx *Tx, op Operation, d Decision) (Operation, Approval, error) {
	if d.Target == nil {
		return Operation{}, Approval{}, ErrNoTarget
	}
	var approverToken *uuid.UUID
	if d.ApproverTokenID != uuid.Nil {
		approverToken = &d.ApproverTokenID
		// A person's decision stands only if their token does, ordered
		// against its revocation (approverTokenLock).
		if err := lockApprover(ctx, tx.tx, d.ApproverTokenID); err != nil {
			return Operation{}, Approval{}, err
		}
	}
	now := s.nowArg()
	rows, _ := tx.tx.Query(ctx, approvalGrant, pgx.StrictNamedArgs{
		"id": uuid.Must(uuid.NewV7()), "tenant": op.TenantID, "action": op.Action, "params": []byte(op.Params),
		"fingerprint": op.ParamsFingerprint, "policy_version": d.PolicyVersion, "approver_token": approverToken,
		"approver": d.Approver, "operation": op.ID, "note": nullString(d.Note), "ttl": d.TTL.Microseconds(), "now": now,
		"account": d.Target.Account, "environment": d.Target.Environment, "scope": op.Scope,
	})
	approval, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Approval])
	if err != nil {
		return Operation{}, Approval{}, fmt.Errorf("grant approval to %s: %w", op.ID, err)
	}
	queued, err := s.TransitionTx(ctx, tx, Change{
		ID: op.ID, From: StatusAwaitingApproval, Version: op.Version, To: StatusQueued,
		Kind: EventApproved, Actor: d.Approver, ApprovalID: approval.ID,
		Detail: map[string]any{
			"approval_id": approval.ID, "approver": d.Approver, "policy_version": d.PolicyVersion,
			"expires_at": approval.ExpiresAt, "note": d.Note, "params_fingerprint": op.ParamsFingerprint,
		},
	})
	if errors.Is(err, ErrStale) {
		return Operation{}, Approval{}, fmt.Errorf("%w: %s changed meanwhile", ErrNotAwaitingApproval, op.ID)
	}
	if err != nil {
		return Operation{}, Approval{}, fmt.Errorf("queue approved %s: %w", op.ID, err)
	}
	return queued, approval, nil
}

// AwaitingCursor is the position of the last proposal of a page.
type AwaitingCursor struct {
	CreatedAt time.Time `json:"t"`
	ID        uuid.UUID `json:"id"`
}

// ApprovalRequest is an open proposal and the name of the token that
// made it.
type ApprovalRequest struct {
	Operation
	RequestedByName string `db:"requested_by_name"`
}

// AwaitingPage returns at most limit open proposals that in may see,
// oldest first, after the position after (nil: from the oldest).
func (s *Store) AwaitingPage(ctx context.Context, in Access, after *AwaitingCursor, limit int) ([]ApprovalRequest, error) {
	var afterAt *time.Time
	afterID := uuid.Nil
	if after != nil {
		afterAt, afterID = &after.CreatedAt, after.ID
	}
	rows, _ := s.pool.Query(ctx, operationsAwaitingPage, pgx.StrictNamedArgs{
		"tenant": in.Tenant, "scope": in.scope(), "after_at": afterAt, "after_id": afterID, "limit": limit, "now": s.nowArg(),
	})
	ops, err := pgx.CollectRows(rows, pgx.RowToStructByName[ApprovalRequest])
	if err != nil {
		return nil, fmt.Errorf("list approval requests: %w", err)
	}
	return ops, nil
}

// DefaultExpireBatch is how many lapsed proposals one sweep holds per
// transaction.
const DefaultExpireBatch = 100

// HoldExpiredRequests holds proposals that nobody decided before their
// request_ttl, at most DefaultExpireBatch of them, and returns them. A
// held proposal was never sent; its summary says it expired.
func (s *Store) HoldExpiredRequests(ctx context.Context, actor string) ([]Operation, error) {
	var held []Operation
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		held, err = s.holdUnsentFlagged(ctx, tx, operationsRequestExpired,
			pgx.StrictNamedArgs{"now": s.nowArg(), "limit": DefaultExpireBatch},
			EventApprovalRequestExpired, actor, FlagApprovalRequestExpired)
		return err
	})
	return held, err
}
