package testfactory

import (
	"cmp"
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/action"
	"github.com/actledger/actledger/ledger"
)

// DefaultAction and DefaultProvider are what an operation Operation makes
// is for unless its OperationOpts say otherwise: the action every test
// pipeline configures, on its provider acme.
const (
	DefaultAction   = "supplier.create_order"
	DefaultProvider = "acme"
)

// DefaultTarget is the account and environment an approval Operation
// grants is bound to unless its OperationOpts say otherwise: those of the
// test pipeline's providers.
var DefaultTarget = ledger.Target{Account: "acct_test", Environment: "test"}

// OperationOpts say which operation Operation makes. Zero values mean the
// documented defaults.
type OperationOpts struct {
	// Tenant's agent asks for the operation and its approver approves
	// it. Required.
	Tenant Tenant
	// Action and Provider default to DefaultAction and DefaultProvider.
	Action, Provider string
	// Key is the operation's key; default a fresh one.
	Key string
	// ClientKey is the caller's key kept beside a business key. The
	// ledger keeps any: one written past the API, or before the API
	// refused some (invisible characters), is shown as it is.
	ClientKey string
	// Params is the operation's params, a JSON object; default {}.
	Params string
	// Target is what the approval is bound to; default DefaultTarget.
	Target *ledger.Target
	// Status is the state the operation is left in:
	// StatusAwaitingApproval (a proposal nobody decided),
	// StatusQueued (approved and enqueued; the default), StatusReview
	// (enqueued, then handed to a person with Review), StatusCancelled or
	// StatusHeld (enqueued, then ended unsent), or, after a claim by
	// worker "test" (StatusDispatching, its lease ending at LeaseUntil),
	// StatusRetryWait (not executed, retried in a minute), StatusUnknown
	// (an unknown answer, looked up in a minute), StatusSucceeded or
	// StatusFailed.
	Status ledger.Status
	// LeaseUntil is a StatusDispatching operation's lease end; default
	// 30 s after the store's now. One in the past is a claim whose worker
	// stopped reporting.
	LeaseUntil time.Time
	// Review is a StatusReview operation's review; its zero fields
	// default to ReasonOutcomeUnknown, owner "ops" and a deadline an
	// hour from the store's now.
	Review ledger.Review
}

// Operation makes one operation of opts.Tenant in opts.Status with the
// ledger's own functions (an approval and an enqueue, or a proposal, then
// a transition), as the API and the workers call them, and returns it as
// the ledger then holds it. A failure ends t. It goes past the API, so a
// test states the operation it starts from in one line, in any state the
// API would not let it make directly; its events are those the ledger
// writes, by the tenant's agent and approver, and "test" for a
// transition.
func Operation(t TB, store *ledger.Store, opts OperationOpts) ledger.Operation {
	t.Helper()
	ctx := context.Background()
	name, providerName := cmp.Or(opts.Action, DefaultAction), cmp.Or(opts.Provider, DefaultProvider)
	key := cmp.Or(opts.Key, "op-"+uuid.NewString())
	params := []byte(cmp.Or(opts.Params, "{}"))
	agent := opts.Tenant.Agent.Principal
	if opts.Status == ledger.StatusAwaitingApproval {
		op, _, err := store.Propose(ctx, ledger.ProposeRequest{
			TenantID: agent.TenantID, TokenID: agent.TokenID, Actor: agent.Actor(), Action: name, Key: key,
			ClientKey: opts.ClientKey, Provider: providerName, Params: params, RequestTTL: action.DefaultRequestTTL,
		})
		if err != nil {
			t.Fatalf("testfactory: propose %s: %v", key, err)
		}
		return op
	}
	target := opts.Target
	if target == nil {
		target = &DefaultTarget
	}
	approver := opts.Tenant.Approver.Principal
	a, err := store.CreateApproval(ctx, ledger.NewApproval{
		TenantID: approver.TenantID, ApproverTokenID: approver.TokenID, Action: name, Params: params,
		PolicyVersion: "p1", ExpiresAt: store.Now().Add(time.Hour), Target: target,
	})
	if err != nil {
		t.Fatalf("testfactory: approve %s: %v", key, err)
	}
	op, _, err := store.Enqueue(ctx, ledger.EnqueueRequest{
		TenantID: agent.TenantID, TokenID: agent.TokenID, Actor: agent.Actor(), Action: name, Key: key,
		ClientKey: opts.ClientKey, Provider: providerName, Params: params, ApprovalID: a.ID,
	})
	if err != nil {
		t.Fatalf("testfactory: enqueue %s: %v", key, err)
	}
	switch opts.Status {
	case "", ledger.StatusQueued:
		return op
	case ledger.StatusReview:
		review := opts.Review
		review.Reason = cmp.Or(review.Reason, ledger.ReasonOutcomeUnknown)
		review.Owner = cmp.Or(review.Owner, "ops")
		if review.Deadline.IsZero() {
			review.Deadline = store.Now().Add(time.Hour)
		}
		op, err = store.Transition(ctx, ledger.Change{
			ID: op.ID, From: op.Status, Version: op.Version, To: ledger.StatusReview, Kind: "test_review", Actor: "test",
			Review: &review,
		})
		if err != nil {
			t.Fatalf("testfactory: move %s to review: %v", key, err)
		}
		return op
	case ledger.StatusCancelled, ledger.StatusHeld:
		return move(t, store, op, ledger.Change{To: opts.Status, Kind: "test_end"})
	}
	lease := opts.LeaseUntil
	if lease.IsZero() {
		lease = store.Now().Add(30 * time.Second)
	}
	op, _, err = store.Claim(ctx, ledger.Change{
		ID: op.ID, From: op.Status, Version: op.Version, To: ledger.StatusDispatching, Kind: ledger.EventClaimed, Actor: "test",
		LeaseOwner: "test", LeaseUntil: lease,
	}, *target)
	if err != nil {
		t.Fatalf("testfactory: claim %s: %v", key, err)
	}
	now := store.Now()
	sent := ledger.Change{Kind: ledger.EventAttempt, Attempted: true, SentFrom: now, SentAt: now}
	switch opts.Status {
	case ledger.StatusDispatching:
		return op
	case ledger.StatusRetryWait:
		sent.To, sent.NextAttemptAt, sent.Detail = ledger.StatusRetryWait, now.Add(time.Minute), map[string]any{"class": "not_executed"}
	case ledger.StatusUnknown:
		sent.To, sent.NextAttemptAt, sent.Detail = ledger.StatusUnknown, now.Add(time.Minute), map[string]any{"class": "unknown"}
	case ledger.StatusSucceeded:
		sent.To, sent.Detail = ledger.StatusSucceeded, map[string]any{"class": "succeeded"}
	case ledger.StatusFailed:
		sent.To, sent.Detail = ledger.StatusFailed, map[string]any{"class": "rejected"}
	default:
		t.Fatalf("testfactory: no way yet to an operation in status %s", opts.Status)
	}
	return move(t, store, op, sent)
}

// move applies c (its To, Kind and what it records) to op as the ledger
// holds it, by actor "test".
func move(t TB, store *ledger.Store, op ledger.Operation, c ledger.Change) ledger.Operation {
	t.Helper()
	c.ID, c.From, c.Version, c.Actor = op.ID, op.Status, op.Version, "test"
	moved, err := store.Transition(context.Background(), c)
	if err != nil {
		t.Fatalf("testfactory: move %s from %s to %s: %v", op.Key, op.Status, c.To, err)
	}
	return moved
}

// operationsBackdate moves operations @ids @age_us microseconds into the
// past, both when they were created and when they last changed. Their
// events keep their own times: the history is append-only.
const operationsBackdate = `UPDATE operations
SET created_at = created_at - @age_us::bigint * interval '1 microsecond',
    updated_at = updated_at - @age_us::bigint * interval '1 microsecond'
WHERE id = ANY (@ids)`

// Backdate moves operations ids age into the past, as if they had been
// created and had settled then: what a retention test needs of operations
// run to their end through the real path. The pruner judges an
// operation's own times, not its events'. A failure ends t.
func Backdate(t TB, db ledger.DBTX, age time.Duration, ids ...uuid.UUID) {
	t.Helper()
	if _, err := db.Exec(context.Background(), operationsBackdate, pgx.StrictNamedArgs{"ids": ids, "age_us": age.Microseconds()}); err != nil {
		t.Fatalf("testfactory: backdate %d operations: %v", len(ids), err)
	}
}

// operationsLose deletes operations @ids and every row that names them,
// as a ledger restored from before their transactions holds them
// (nothing: no tombstone either, unlike a prune). The history's deletes
// pass the append-only trigger as a prune's do (schema 031).
const operationsLose = `WITH allow AS (SELECT set_config('actledger.prune', 'on', true)),
events AS (DELETE FROM operation_events WHERE operation_id = ANY (@ids) AND (SELECT true FROM allow)),
outbox AS (DELETE FROM outbox WHERE msg_id LIKE 'dispatch.%' AND split_part(msg_id, '.', 2)::uuid = ANY (@ids)),
stale AS (DELETE FROM stale_results WHERE operation_id = ANY (@ids)),
conflicts AS (DELETE FROM operation_key_conflicts WHERE operation_id = ANY (@ids)),
watches AS (DELETE FROM operation_watches WHERE operation_id = ANY (@ids)),
notified AS (SELECT id FROM notifications WHERE operation_id = ANY (@ids)),
deliveries AS (DELETE FROM notification_deliveries WHERE notification_id IN (SELECT id FROM notified)),
notifications AS (DELETE FROM notifications WHERE id IN (SELECT id FROM notified))
DELETE FROM operations WHERE id = ANY (@ids)`

// Lose makes the ledger forget operations ids, as a failover to an
// asynchronous replica or a point-in-time restore forgets the last
// seconds' commits: whatever they did outside Postgres (an order at a
// supplier, a message in the streams) stays. A failure ends t.
func Lose(t TB, db ledger.DBTX, ids ...uuid.UUID) {
	t.Helper()
	tag, err := db.Exec(context.Background(), operationsLose, pgx.StrictNamedArgs{"ids": ids})
	if err != nil {
		t.Fatalf("testfactory: lose %d operations: %v", len(ids), err)
	}
	if tag.RowsAffected() != int64(len(ids)) {
		t.Fatalf("testfactory: lose %d operations: %d were in the ledger", len(ids), tag.RowsAffected())
	}
}

// operationEnqueueAsPreviousRelease is the enqueue of the release before
// schema 041, whose external key was 'al_' || id: its call of
// enqueue_operation, with that key.
const operationEnqueueAsPreviousRelease = `SELECT e.created FROM enqueue_operation(
    p_id => @id, p_tenant => @tenant, p_action => @action, p_key => @key, p_provider => @provider,
    p_params => @params, p_fingerprint => @fingerprint, p_approval => @approval, p_token => @token,
    p_external_key => @external_key, p_now => NULL, p_actor => @actor,
    p_subject => @subject, p_msg_id => @msg_id, p_payload => @payload) e`

// OperationOfPreviousRelease makes a queued operation of opts.Tenant as a
// process of the release before schema 041 stored it, its external key
// 'al_' || id (ledger.ExternalKeyOfID), with its dispatch message on
// subject (the provider's dispatch subject, which only a dispatcher
// reads), through db; it returns it as the ledger holds it. opts.Status
// must be empty or queued. A failure ends t.
func OperationOfPreviousRelease(t TB, store *ledger.Store, db ledger.DBTX, subject string, opts OperationOpts) ledger.Operation {
	t.Helper()
	ctx := context.Background()
	if opts.Status != "" && opts.Status != ledger.StatusQueued {
		t.Fatalf("testfactory: an operation of the previous release is made queued, not %s", opts.Status)
	}
	name, providerName := cmp.Or(opts.Action, DefaultAction), cmp.Or(opts.Provider, DefaultProvider)
	key := cmp.Or(opts.Key, "op-"+uuid.NewString())
	canonical, fingerprint, err := ledger.Canonicalize([]byte(cmp.Or(opts.Params, "{}")))
	if err != nil {
		t.Fatalf("testfactory: params of %s: %v", key, err)
	}
	target := opts.Target
	if target == nil {
		target = &DefaultTarget
	}
	approver, agent := opts.Tenant.Approver.Principal, opts.Tenant.Agent.Principal
	a, err := store.CreateApproval(ctx, ledger.NewApproval{
		TenantID: approver.TenantID, ApproverTokenID: approver.TokenID, Action: name, Params: canonical,
		PolicyVersion: "p1", ExpiresAt: store.Now().Add(time.Hour), Target: target,
	})
	if err != nil {
		t.Fatalf("testfactory: approve %s: %v", key, err)
	}
	id := uuid.Must(uuid.NewV7())
	msg := ledger.DispatchMessage{Subject: subject, OperationID: id, Version: 1}.Outbox()
	var created bool
	if err := db.QueryRow(ctx, operationEnqueueAsPreviousRelease, pgx.StrictNamedArgs{
		"id": id, "tenant": agent.TenantID, "action": name, "key": key, "provider": providerName,
		"params": canonical, "fingerprint": fingerprint, "approval": a.ID, "token": agent.TokenID,
		"external_key": ledger.ExternalKeyOfID(id), "actor": agent.Actor(),
		"subject": msg.Subject, "msg_id": msg.MsgID, "payload": msg.Payload,
	}).Scan(&created); err != nil || !created {
		t.Fatalf("testfactory: enqueue %s as the previous release: created %v, %v", key, created, err)
	}
	op, err := store.Get(ctx, ledger.WholeTenant(agent.TenantID), id)
	if err != nil {
		t.Fatalf("testfactory: read %s: %v", key, err)
	}
	return op
}
