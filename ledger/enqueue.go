package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/actledger/actledger/tracing"
)

// EnqueueRequest is an agent's request to carry out an approved action.
type EnqueueRequest struct {
	TenantID uuid.UUID
	TokenID  uuid.UUID // the agent token that asked; revoking it holds unsent work
	Actor    string    // names the asker in events, e.g. "agent:<token name>"
	Action   string
	Key      string // caller's business reference; empty means the approval's id
	// ClientKey is the caller's key when Key is the action's business key
	// (derived from the params); kept for tracing, it decides nothing.
	ClientKey string
	// Scope is the new operation's access scope: the asking token's, or,
	// for a compensation, the scope of the operation it compensates
	// (empty: the whole tenant's). The approval must admit it, and a key
	// held by an operation this scope may not see is ErrKeyInUseElsewhere:
	// keys are unique per tenant.
	Scope      string
	Provider   string // the provider the action maps to
	Params     []byte // any JSON object; canonicalised here
	ApprovalID uuid.UUID
}

// ExternalKeyOf is the external key of a new operation of tenant under
// (action, key): the key sent to its supplier in the idempotency header
// and the reference param, which never changes whatever happens to the
// operation. It is derived from the operation's business identity, not
// its id, so an operation the ledger lost (a failover to an asynchronous
// replica, a restore) and that an agent asks for again under the same key
// sends the same key: the supplier's dedup and the lookup find the first
// effect (docs/contract.md, "External key").
//
// Its spelling is that of every earlier key, "al_" and a UUID (39
// characters of [0-9a-z_-]), so no supplier's limit on a key or a
// reference that earlier keys met (Stripe's 255 characters for an
// Idempotency-Key, https://docs.stripe.com/api/idempotent_requests, which
// internal/mocksupplier/stripe enforces; the recipes' metadata and
// external-id fields) and no reader of references (drill's pattern, the
// fakes' matching) changes: the UUID is version 8 (RFC 9562, "custom")
// made of the first 122 bits of SHA-256 over tenant's 16 bytes, then
// action and key each after its length as 4 bytes big-endian, so that no
// two identities share an encoding. A version-8 key never equals an id's
// (version 7), and two identities share a key only if SHA-256 truncated
// to 122 bits collides. Callers treat it as opaque.
func ExternalKeyOf(tenant uuid.UUID, action, key string) string {
	h := sha256.New()
	h.Write(tenant[:])
	var n [4]byte
	for _, s := range []string{action, key} {
		binary.BigEndian.PutUint32(n[:], uint32(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	var id uuid.UUID
	copy(id[:], h.Sum(nil))
	id[6] = id[6]&0x0f | 0x80 // version 8
	id[8] = id[8]&0x3f | 0x80 // the RFC 9562 variant
	return externalKeyPrefix + id.String()
}

// ExternalKeyOfID is the external key of an operation made before schema
// 041: "al_" and its id. Those operations keep it, and a lookup of such a
// key reads by the id it spells.
func ExternalKeyOfID(id uuid.UUID) string {
	return externalKeyPrefix + id.String()
}

const externalKeyPrefix = "al_"

// operationIDOf is ExternalKeyOfID's inverse: the id that key spells, if
// it is an operation's key made before schema 041. Evidence names any
// string; only that exact spelling names an id.
func operationIDOf(key string) (uuid.UUID, bool) {
	s, ok := strings.CutPrefix(key, externalKeyPrefix)
	if !ok {
		return uuid.Nil, false
	}
	id, err := uuid.Parse(s)
	if err != nil || id.Version() == 8 || ExternalKeyOfID(id) != key {
		return uuid.Nil, false
	}
	return id, true
}

// operationEnqueue runs enqueue_operation (schema/functions/enqueue_operation.sql):
// the whole enqueue transaction in one round trip.
const operationEnqueue = `SELECT e.created, e.created_at, e.tenant, e.external_key, ab.approved_by FROM enqueue_operation(
    p_id => @id, p_tenant => @tenant, p_action => @action, p_key => @key, p_provider => @provider,
    p_params => @params, p_fingerprint => @fingerprint, p_approval => @approval, p_token => @token,
    p_external_key => @external_key, p_now => @now, p_actor => @actor,
    p_subject => @subject, p_msg_id => @msg_id, p_payload => @payload, p_client_key => @client_key,
    p_scope => @scope, p_traceparent => @traceparent) e
CROSS JOIN LATERAL (SELECT ` + approvedByColumn + ` FROM (VALUES (@approval::uuid)) AS o (approval_id)) ab`

// approvalRefused is the SQLSTATE enqueue_operation raises when the approval
// does not authorise the operation; the message is the ApprovalCode.
const approvalRefused = "AL403"

// tombstoneRefused is the SQLSTATE key_tombstone_reuse raises when a key
// retention pruned is asked for again with other params (message
// key_conflict) or from a scope that may not see it (key_in_use_elsewhere).
const tombstoneRefused = "AL409"

// tombstoneError is the answer to a key_tombstone_reuse refusal: the same
// error as a live key's conflict, without an operation to name (it was
// pruned).
func tombstoneError(pgErr *pgconn.PgError, req EnqueueRequest) error {
	if pgErr.Message == "key_in_use_elsewhere" {
		return fmt.Errorf("%w: %s/%s", ErrKeyInUseElsewhere, req.Action, req.Key)
	}
	return fmt.Errorf("%w: %s/%s: %s", ErrKeyConflict, req.Action, req.Key, pgErr.Detail)
}

// Enqueue stores a new operation with its created event and its outbox
// message, consuming one use of the approval, all in one transaction.
//
// A request whose (tenant, action, key) exists already is a replay: with the
// same canonical params it returns the current operation and replayed=true;
// with other params it records the conflict (an event the first time, a
// count every time) and returns a *KeyConflictError (ErrKeyConflict,
// naming the existing operation, which comes back too). Approval problems
// return *ApprovalError.
// The unique key makes concurrent identical requests converge on one
// operation: INSERT … ON CONFLICT waits for the first inserter to commit.
//
// Keys are unique per tenant, not per access scope: when the operation
// that holds the key is one req.Scope may not see (another scope's), it
// returns ErrKeyInUseElsewhere, and neither the operation nor its history
// learns of the request.
func (s *Store) Enqueue(ctx context.Context, req EnqueueRequest) (op Operation, replayed bool, err error) {
	// Only in a trace (the request's, with tracing on): otherwise no span,
	// no trace context, nothing allocated.
	ctx, span := tracing.Start(ctx, s.tracer, "enqueue")
	defer func() { endEnqueueSpan(span, op, replayed, err) }()
	c, err := s.newEnqueueCall(ctx, req)
	if err != nil {
		return Operation{}, false, err
	}
	// Concurrent enqueues share round trips and commits; ordering them by
	// their unique key keeps two shared transactions from deadlocking on it.
	order := uuid.NewSHA1(c.req.TenantID, []byte(c.req.Action+"\x00"+c.req.Key))
	err = s.group.doSet(ctx, order, s.enqueues, c)
	op, replayed, err = s.finishEnqueue(ctx, s.pool, c, err)
	if err == nil && !replayed {
		s.signalOutbox()
	}
	return op, replayed, err
}

// EnqueueTx is Enqueue inside the caller's transaction tx, for an
// operation that must exist only if the caller's other writes commit (a
// compensation created with an operator's resolution). After an error the
// caller rolls tx back (an approval refusal has aborted it already).
func (s *Store) EnqueueTx(ctx context.Context, tx *Tx, req EnqueueRequest) (op Operation, replayed bool, err error) {
	c, err := s.newEnqueueCall(ctx, req)
	if err != nil {
		return Operation{}, false, err
	}
	args, err := c.namedArgs()
	if err != nil {
		return Operation{}, false, err
	}
	err = c.scan(tx.tx.QueryRow(ctx, enqueueStmt.SQL, args...))
	op, replayed, err = s.finishEnqueue(ctx, tx.tx, c, err)
	if err == nil && !replayed {
		tx.wroteOutbox = true // enqueue_operation wrote its dispatch message
	}
	return op, replayed, err
}

// operationsEnqueue runs enqueue_operations (schema/functions/enqueue_operations.sql):
// the enqueues of a shared batch in one statement, when every one of them
// creates its operation; otherwise it fails (SQLSTATE ALSET) and each
// runs again alone through operationEnqueue.
const operationsEnqueue = `SELECT e.ord, e.created_at, e.tenant, ab.approved_by FROM enqueue_operations(
    p_id => @id, p_tenant => @tenant, p_action => @action, p_key => @key, p_provider => @provider,
    p_params => @params, p_fingerprint => @fingerprint, p_approval => @approval, p_token => @token,
    p_external_key => @external_key, p_now => @now, p_actor => @actor,
    p_subject => @subject, p_msg_id => @msg_id, p_payload => @payload, p_client_key => @client_key,
    p_scope => @scope, p_traceparent => @traceparent) e
CROSS JOIN LATERAL (SELECT ` + approvedByColumn + ` FROM (VALUES ((@approval::uuid[])[e.ord])) AS o (approval_id)) ab`

var enqueuesStmt = mustNamed(operationsEnqueue)

// queueEnqueues is the enqueues writeSet's queue: one enqueue alone goes
// through enqueue_operation, which decides every case; several share one
// enqueue_operations statement.
func (s *Store) queueEnqueues(b *pgx.Batch, items []any) error {
	if len(items) == 1 {
		c := items[0].(*enqueueCall)
		args, err := c.namedArgs()
		if err != nil {
			return err
		}
		b.Queue(enqueueStmt.SQL, args...).QueryRow(c.scan)
		return nil
	}
	n := len(items)
	calls := make([]*enqueueCall, n)
	var (
		ids, tenants, approvals, tokens        = make([]uuid.UUID, n), make([]uuid.UUID, n), make([]uuid.UUID, n), make([]uuid.UUID, n)
		actions, keys, providers, fingerprints = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		externalKeys, actors, subjects, msgIDs = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		params, payloads                       = make([][]byte, n), make([][]byte, n)
		clientKeys, scopes, traceparents       = make([]*string, n), make([]*string, n), make([]*string, n)
	)
	for i, item := range items {
		c := item.(*enqueueCall)
		calls[i] = c
		ids[i], tenants[i], approvals[i], tokens[i] = c.id, c.req.TenantID, c.req.ApprovalID, c.req.TokenID
		actions[i], keys[i], providers[i], fingerprints[i] = c.req.Action, c.req.Key, c.req.Provider, c.fingerprint
		externalKeys[i], actors[i], subjects[i], msgIDs[i] = c.externalKey, c.req.Actor, c.msg.Subject, c.msg.MsgID
		params[i], payloads[i], clientKeys[i], scopes[i] = c.canonical, c.msg.Payload, nullString(c.req.ClientKey), nullString(c.req.Scope)
		traceparents[i] = nullString(c.msg.Traceparent)
	}
	args, err := enqueuesStmt.args(pgx.StrictNamedArgs{
		"id": ids, "tenant": tenants, "action": actions, "key": keys, "provider": providers,
		"params": params, "fingerprint": fingerprints, "approval": approvals, "token": tokens,
		"external_key": externalKeys, "now": s.nowArg(), "actor": actors,
		"subject": subjects, "msg_id": msgIDs, "payload": payloads, "client_key": clientKeys, "scope": scopes,
		"traceparent": traceparents,
	})
	if err != nil {
		return err
	}
	b.Queue(enqueuesStmt.SQL, args...).Query(func(rows pgx.Rows) error {
		for _, c := range calls {
			c.created, c.createdAt, c.tenant, c.storedKey, c.approvedBy = false, nil, nil, nil, nil
		}
		var (
			ord        int
			createdAt  time.Time
			tenant     string
			approvedBy *string
		)
		_, err := pgx.ForEachRow(rows, []any{&ord, &createdAt, &tenant, &approvedBy}, func() error {
			at, name := createdAt, tenant // each call keeps its own copy
			c := calls[ord-1]
			c.created, c.createdAt, c.tenant, c.approvedBy = true, &at, &name, approvedBy
			c.storedKey = &c.externalKey // enqueue_operations took no tombstoned key
			return nil
		})
		return err
	})
	return nil
}

// enqueueCall is one enqueue_operation call: its arguments and results.
type enqueueCall struct {
	req         EnqueueRequest
	id          uuid.UUID
	canonical   []byte
	fingerprint string
	externalKey string // ExternalKeyOf the request
	msg         OutboxMessage
	now         *time.Time

	created    bool
	createdAt  *time.Time
	tenant     *string
	storedKey  *string // the external key stored: externalKey or a tombstone's
	approvedBy *string
}

func (s *Store) newEnqueueCall(ctx context.Context, req EnqueueRequest) (*enqueueCall, error) {
	subject, err := s.dispatchSubject(req.Provider)
	if err != nil {
		return nil, err
	}
	canonical, fingerprint, err := Canonicalize(req.Params)
	if err != nil {
		return nil, err
	}
	if req.Key == "" {
		if req.ApprovalID == uuid.Nil {
			return nil, &ApprovalError{Code: ApprovalMismatch, Reason: "no approval given"}
		}
		req.Key = req.ApprovalID.String()
	}
	if req.Actor == "" {
		req.Actor = "token:" + req.TokenID.String()
	}
	id := uuid.Must(uuid.NewV7())
	return &enqueueCall{
		req: req, id: id, canonical: canonical, fingerprint: fingerprint,
		externalKey: ExternalKeyOf(req.TenantID, req.Action, req.Key),
		msg:         DispatchMessage{Subject: subject, OperationID: id, Version: 1, Traceparent: tracing.Traceparent(ctx)}.Outbox(),
		now:         s.nowArg(),
	}, nil
}

var enqueueStmt = mustNamed(operationEnqueue)

// namedArgs are operationEnqueue's arguments; an error means the statement
// and this list disagree.
func (c *enqueueCall) namedArgs() ([]any, error) {
	return enqueueStmt.args(pgx.StrictNamedArgs{
		"id": c.id, "tenant": c.req.TenantID, "action": c.req.Action, "key": c.req.Key, "provider": c.req.Provider,
		"params": c.canonical, "fingerprint": c.fingerprint, "approval": c.req.ApprovalID, "token": c.req.TokenID,
		"external_key": c.externalKey, "now": c.now, "actor": c.req.Actor,
		"subject": c.msg.Subject, "msg_id": c.msg.MsgID, "payload": c.msg.Payload, "client_key": nullString(c.req.ClientKey),
		"scope": nullString(c.req.Scope), "traceparent": nullString(c.msg.Traceparent),
	})
}

// scan keeps the call's results; it may run twice (a failed shared batch
// is retried alone), so it overwrites.
func (c *enqueueCall) scan(row pgx.Row) error {
	return row.Scan(&c.created, &c.createdAt, &c.tenant, &c.storedKey, &c.approvedBy)
}

// finishEnqueue turns the call's outcome (err is the statement's) into
// Enqueue's answer, reading an existing key's operation through db.
func (s *Store) finishEnqueue(ctx context.Context, db DBTX, c *enqueueCall, err error) (Operation, bool, error) {
	req := c.req
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == approvalRefused:
		return Operation{}, false, &ApprovalError{Code: ApprovalCode(pgErr.Message), Reason: pgErr.Detail}
	case errors.As(err, &pgErr) && pgErr.Code == tombstoneRefused:
		return Operation{}, false, tombstoneError(pgErr, req)
	case err != nil:
		return Operation{}, false, fmt.Errorf("enqueue operation: %w", err)
	case c.created:
		return Operation{
			ID: c.id, TenantID: req.TenantID, Tenant: deref(c.tenant), Action: req.Action, Key: req.Key,
			Provider: req.Provider, Params: c.canonical, ParamsFingerprint: c.fingerprint,
			ApprovalID: req.ApprovalID, RequestedBy: req.TokenID, ExternalKey: deref(c.storedKey),
			Status: StatusQueued, Version: 1, Flags: []string{}, CreatedAt: *c.createdAt, UpdatedAt: *c.createdAt,
			ClientKey: nullString(req.ClientKey), Scope: nullString(req.Scope), Traceparent: nullString(c.msg.Traceparent),
			ApprovedBy: c.approvedBy,
		}, false, nil
	}

	// The key exists: the conflicting row is committed (ON CONFLICT waited
	// for it, or it was inserted by an earlier enqueue of the same shared
	// transaction, which has committed now), so this read sees it, unless
	// the request's scope may not: then another scope holds the key.
	// Operations are never deleted, so not found means exactly that.
	op, err := s.getByKey(ctx, db, Access{Tenant: req.TenantID, Scope: req.Scope}, req.Action, req.Key)
	if errors.Is(err, ErrNotFound) {
		return Operation{}, false, fmt.Errorf("%w: %s/%s", ErrKeyInUseElsewhere, req.Action, req.Key)
	}
	if err != nil {
		return Operation{}, false, err
	}
	if op.ParamsFingerprint == c.fingerprint {
		return op, true, nil
	}
	conflict := map[string]any{"params_fingerprint": c.fingerprint, "token_id": req.TokenID, "approval_id": req.ApprovalID}
	if req.ClientKey != "" {
		// The attempt's own key is recorded nowhere else.
		conflict["client_key"] = req.ClientKey
	}
	if err := s.recordKeyConflict(ctx, db, op.ID, req.Actor, conflict); err != nil {
		return op, false, err
	}
	return op, false, &KeyConflictError{Existing: op}
}

// endEnqueueSpan ends an enqueue's span with what it did, when the span
// records: the operation, and its state (a replay's is the existing one).
func endEnqueueSpan(span trace.Span, op Operation, replayed bool, err error) {
	if span.IsRecording() {
		if op.ID != uuid.Nil {
			span.SetAttributes(tracing.OperationID.String(op.ID.String()), tracing.Tenant.String(op.Tenant),
				tracing.Action.String(op.Action), tracing.Provider.String(op.Provider), tracing.State.String(string(op.Status)),
				attribute.Bool("actledger.replayed", replayed))
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
