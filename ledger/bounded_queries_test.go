package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/internal/bigledger"
)

// TestQueriesStayBoundedOnALargeLedger: on a ledger of 200,000 operations
// (97 % terminal) and 840,000 events, every query a background loop runs
// again and again (lease and stuck-dispatch sweeps, request expiry, lapse
// checks and revocation holds, the evidence sweep) and every list an API
// or console page reads (review, approval requests, operations with and
// without a state and a cursor, in flight, a resume) and what a replay
// reads per item reads operations and operation_events through an index
// condition or under a limit, and never more than bigledger.MaxRowsRead
// rows of them: what it costs grows with the open work, not with the
// history; the console overview's counts by state read no operation at
// all. The statements are the ones the store runs, with the
// parameters it gives them (its defaults for limits, the database's
// clock).
func TestQueriesStayBoundedOnALargeLedger(t *testing.T) {
	t.Parallel()
	l := bigledger.New(t)
	ctx := context.Background()
	tenant := l.Tenant
	var now *time.Time // the store's default: the database's clock

	// A second page of each list starts where a first page ended.
	var reviewAt time.Time
	var reviewID uuid.UUID
	if err := l.Pool.QueryRow(ctx, `SELECT updated_at, id FROM operations WHERE id = $1`, l.Review[len(l.Review)-1]).
		Scan(&reviewAt, &reviewID); err != nil {
		t.Fatal(err)
	}
	var middleAt time.Time
	var middleID uuid.UUID
	if err := l.Pool.QueryRow(ctx, `SELECT created_at, id FROM operations WHERE tenant_id = $1
ORDER BY created_at, id OFFSET 50000 LIMIT 1`, tenant).Scan(&middleAt, &middleID); err != nil {
		t.Fatal(err)
	}

	detail := []byte(`{"reason": "replay"}`)
	// whole is a caller of the whole tenant (no scope): the widest read.
	whole := WholeTenant(tenant).scope()
	queries := []bigledger.Query{
		{Name: "lease sweep (operationsLeaseExpired)", SQL: operationsLeaseExpired, Args: []any{now, 500}},
		{Name: "stuck-dispatch sweep (operationsRedispatch)", SQL: operationsRedispatch, Args: []any{pgx.StrictNamedArgs{
			"cutoff": time.Now().Add(-5 * time.Minute), "now": now, "base_us": time.Second.Microseconds(),
			"max_backoff_us": (5 * time.Minute).Microseconds(), "limit": 500, "actor": "sweeper", "kind": EventRedispatched,
		}}},
		{Name: "request expiry (operationsRequestExpired)", SQL: operationsRequestExpired, Args: []any{
			pgx.StrictNamedArgs{"now": now, "limit": DefaultExpireBatch}}},
		{Name: "lapse check (operationLapse)", SQL: operationLapse, Args: []any{l.Settled, now, nil, nil}},
		{Name: "lapse checks of a page (operationLapses)", SQL: operationLapses, Args: []any{l.Review, now}},
		{Name: "hold on approval revoke (operationsUnsentByApproval)", SQL: operationsUnsentByApproval, Args: []any{l.Approval}},
		{Name: "hold on token revoke (operationsUnsentByToken)", SQL: operationsUnsentByToken, Args: []any{l.Agent}},
		{Name: "hold on approver revoke (operationsUnsentByApprovals)", SQL: operationsUnsentByApprovals, Args: []any{[]uuid.UUID{l.Approval}}},
		{Name: "evidence sweep (webhookEventsSweep)", SQL: webhookEventsSweep, Args: []any{now, 30.0, 300.0, 100}},
		{Name: "evidence sweep (staleResultsSweep)", SQL: staleResultsSweep, Args: []any{now, 30.0, 300.0, 100}},
		{Name: "evidence by key (operationGetByExternalKey)", SQL: operationGetByExternalKey, Args: []any{l.Settled}},
		{Name: "outbox backlog (outboxBacklog)", SQL: outboxBacklog},
		{Name: "console overview by state (operationCountsOf)", SQL: operationCountsOf, Args: []any{tenant, whole}},
		{Name: "console overview by state, a scope (operationCountsOf)", SQL: operationCountsOf, Args: []any{tenant, "supply-eu"}},
		{Name: "review list (operationsInReview)", SQL: operationsInReview, Args: []any{tenant, nil, uuid.Nil, 50, whole}},
		{Name: "review list, next page (operationsInReview)", SQL: operationsInReview, Args: []any{tenant, reviewAt, reviewID, 50, whole}},
		{Name: "review histories (operationEventsOf)", SQL: operationEventsOf, Args: []any{l.Review, tenant, whole}},
		{Name: "review unmatched (unmatchedOpen)", SQL: unmatchedOpen, Args: []any{tenant, nil, int64(0), 50, whole}},
		{Name: "approval requests (operationsAwaitingPage)", SQL: operationsAwaitingPage, Args: []any{pgx.StrictNamedArgs{
			"tenant": tenant, "scope": whole, "now": now, "after_at": nil, "after_id": uuid.Nil, "limit": 100}}},
		{Name: "in flight (operationsInFlight)", SQL: operationsInFlight, Args: []any{tenant, nil, uuid.Nil, 100, whole}},
		{Name: "resume (operationsReleasable)", SQL: operationsReleasable, Args: []any{pgx.StrictNamedArgs{
			"tenant": tenant, "provider": "", "action": "", "after_at": nil, "after_id": uuid.Nil, "limit": DefaultResumeBatch}}},
		{Name: "replay: get (operationGet)", SQL: operationGet, Args: []any{l.Settled, tenant, whole}},
		{Name: "replay: targets (operationForeignTargets)", SQL: operationForeignTargets, Args: []any{l.Settled, "other", "live"}},
		{Name: "replay: history (operationEvents)", SQL: operationEvents, Args: []any{l.Settled, tenant}},
		{Name: "replay: history page (operationEventsPage)", SQL: operationEventsPage, Args: []any{l.Settled, tenant, int64(0), 100}},
		{Name: "replay: event (eventAppend)", SQL: eventAppend, Args: []any{l.Settled, now, EventReplayLookupAbsent, "reconciler:replay", detail}},
	}
	// GET /v1/operations and the console's Operations page take any
	// state, or none, from the caller; and a page deep in the history as
	// well as the newest.
	in := WholeTenant(tenant)
	middle := &OperationsCursor{CreatedAt: middleAt, ID: middleID}
	list := func(name string, f OperationsFilter, after *OperationsCursor) bigledger.Query {
		return bigledger.Query{Name: "operations list (operationsPage) " + name, SQL: operationsPage, Args: []any{operationsPageArgs(in, f, after, 100)}}
	}
	for _, status := range append([]Status{""}, Statuses...) {
		name := "status=" + string(status)
		queries = append(queries, list(name, OperationsFilter{Status: status}, nil), list(name+" deep page", OperationsFilter{Status: status}, middle))
	}
	// The console's filters: a key (one that exists, one that does not:
	// neither reads the history), a time range, and what no index holds
	// (an action, a provider, a client key that no operation has: the page
	// reads its window and stops).
	var someKey string
	if err := l.Pool.QueryRow(ctx, `SELECT key FROM operations WHERE tenant_id = $1 ORDER BY created_at OFFSET 1000 LIMIT 1`, tenant).
		Scan(&someKey); err != nil {
		t.Fatal(err)
	}
	day := middleAt.Add(-24 * time.Hour)
	queries = append(queries,
		list("key", OperationsFilter{Key: someKey}, nil),
		list("key, no such", OperationsFilter{Key: "po-none"}, nil),
		list("key and state", OperationsFilter{Key: someKey, Status: StatusSucceeded}, nil),
		list("a day", OperationsFilter{Since: day, Until: middleAt}, nil),
		list("a day, failed", OperationsFilter{Since: day, Until: middleAt, Status: StatusFailed}, nil),
		list("action", OperationsFilter{Action: "order.create"}, nil),
		list("action, no such", OperationsFilter{Action: "refund.create"}, nil),
		list("provider, no such, deep page", OperationsFilter{Provider: "other"}, middle),
		list("client key, no such", OperationsFilter{ClientKey: "call-none"}, nil),
		list("provider and held", OperationsFilter{Provider: "other", Status: StatusHeld}, nil),
		list("everything", OperationsFilter{Status: StatusFailed, Key: someKey, Action: "order.create", Provider: "mock",
			ClientKey: "call-1", Since: day, Until: middleAt}, nil),
	)
	// A prune (retention) selects a tenant's old terminal operations a
	// batch at a time, from the oldest and from where a batch ended,
	// reads them and their histories, and walks the outbox and the
	// webhook events from their oldest rows.
	cutoff := time.Now().Add(-30 * 24 * time.Hour)
	rows, _ := l.Pool.Query(ctx, `SELECT id FROM operations WHERE tenant_id = $1 AND created_at < $2
AND status = ANY ($3) ORDER BY created_at, id LIMIT $4`, tenant, cutoff, terminalStatuses(), DefaultPruneBatch)
	batch, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil || len(batch) != DefaultPruneBatch {
		t.Fatalf("a batch of old operations: %d, %v", len(batch), err)
	}
	prunable := func(afterAt time.Time, afterID uuid.UUID) pgx.StrictNamedArgs {
		return pgx.StrictNamedArgs{"tenant": tenant, "cutoff": cutoff, "after_at": afterAt, "after_id": afterID,
			"terminal": terminalStatuses(), "limit": DefaultPruneBatch}
	}
	rowArgs := pgx.StrictNamedArgs{"after_id": int64(0), "limit": DefaultPruneBatch, "cutoff": cutoff}
	queries = append(queries,
		bigledger.Query{Name: "prune: select a batch (operationsPrunable)", SQL: operationsPrunable, Args: []any{prunable(time.Time{}, uuid.Nil)}},
		bigledger.Query{Name: "prune: select the next batch (operationsPrunable)", SQL: operationsPrunable, Args: []any{prunable(middleAt, middleID)}},
		bigledger.Query{Name: "prune: read the batch (operationsOfPrune)", SQL: operationsOfPrune, Args: []any{batch}},
		bigledger.Query{Name: "prune: read its histories (eventsOfPrune)", SQL: eventsOfPrune, Args: []any{batch}},
		bigledger.Query{Name: "prune: webhook events (webhookEventsPrune)", SQL: webhookEventsPrune, Args: []any{rowArgs}},
		bigledger.Query{Name: "prune: outbox (outboxPrune)", SQL: outboxPrune, Args: []any{rowArgs}},
	)
	l.RequireBounded(t, queries...)
}
