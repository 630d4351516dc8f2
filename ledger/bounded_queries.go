package ledger

import (
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/internal/bounded"
)

// BoundedQueries are the statements the store runs again and again that
// must cost what the open work costs, not what the history does, with the
// parameters the store gives them on the ledger f names (its defaults for
// limits, the database's clock): what a background loop runs (lease,
// stuck-dispatch and stalled-notification sweeps, request expiry, lapse
// checks and revocation holds, the evidence sweep), every list an API or console page reads
// (review, approval requests, operations with and without a state and a
// cursor, in flight, a resume), what a replay reads per item, and the
// lookups by key and by id every retried enqueue, dispatch message and
// failed compensation makes, the console overview's counts, and what
// a prune (retention) selects and reads per batch. The test
// on a large ledger checks their plans and the benchmark's large stage
// times them (internal/bigledger).
func BoundedQueries(f bounded.Fixture) []bounded.Query {
	tenant := f.Tenant
	var now *time.Time // the store's default: the database's clock
	detail := []byte(`{"reason": "replay"}`)
	// whole is a caller of the whole tenant (no scope): the widest read.
	whole := WholeTenant(tenant).scope()
	queries := []bounded.Query{
		{Name: "lease sweep (operationsLeaseExpired)", SQL: operationsLeaseExpired, Args: []any{now, 500}},
		{Name: "stuck-dispatch sweep (operationsRedispatch)", SQL: operationsRedispatch, Args: []any{pgx.StrictNamedArgs{
			"cutoff": time.Now().Add(-5 * time.Minute), "now": now, "base_us": time.Second.Microseconds(),
			"max_backoff_us": (5 * time.Minute).Microseconds(), "limit": 500, "actor": "sweeper", "kind": EventRedispatched,
		}}, Settings: redispatchPlanning},
		{Name: "stalled-notification sweep (notificationsRepublish)", SQL: notificationsRepublish, Args: []any{
			notificationsRepublishArgs(time.Now().Add(-20*time.Minute), now, 20*time.Minute, 6*time.Hour, 500)}},
		{Name: "request expiry (operationsRequestExpired)", SQL: operationsRequestExpired, Args: []any{
			pgx.StrictNamedArgs{"now": now, "limit": DefaultExpireBatch}}},
		{Name: "lapse check (operationLapse)", SQL: operationLapse, Args: []any{f.Settled, now, nil, nil}},
		{Name: "lapse checks of a page (operationLapses)", SQL: operationLapses, Args: []any{f.Review, now}},
		{Name: "hold on approval revoke (operationsUnsentByApproval)", SQL: operationsUnsentByApproval, Args: []any{f.Approval}},
		{Name: "hold on token revoke (operationsUnsentByToken)", SQL: operationsUnsentByToken, Args: []any{f.Agent}},
		{Name: "hold on approver revoke (operationsUnsentByApprovals)", SQL: operationsUnsentByApprovals, Args: []any{[]uuid.UUID{f.Approval}}},
		{Name: "evidence sweep (webhookEventsSweep)", SQL: webhookEventsSweep, Args: []any{now, 30.0, 300.0, 100}},
		{Name: "evidence sweep (staleResultsSweep)", SQL: staleResultsSweep, Args: []any{now, 30.0, 300.0, 100}},
		{Name: "evidence by key, made before schema 041 (operationGetByExternalKey)", SQL: operationGetByExternalKey, Args: []any{
			pgx.StrictNamedArgs{"key": ExternalKeyOfID(f.Settled), "id": f.Settled}}},
		{Name: "evidence by key, derived (operationGetByExternalKey)", SQL: operationGetByExternalKey, Args: []any{
			pgx.StrictNamedArgs{"key": ExternalKeyOf(tenant, f.SettledAction, f.SettledKey), "id": nil}}},
		{Name: "dispatch message naming no operation (operationMayBePruned)", SQL: operationMayBePruned, Args: []any{
			pgx.StrictNamedArgs{"id": f.Settled, "made": time.Now(), "margin_us": PrunedMargin.Microseconds()}}},
		{Name: "retention: key tombstones (keyTombstonesPrune)", SQL: keyTombstonesPrune, Args: []any{
			pgx.StrictNamedArgs{"cutoff": time.Now().Add(-30 * 24 * time.Hour), "after_at": time.Time{}, "after_id": uuid.Nil,
				"limit": DefaultPruneBatch}}},
		{Name: "enqueue, proposal: a pruned key (keyTombstoneReuse)", SQL: keyTombstoneReuse, Args: []any{pgx.StrictNamedArgs{
			"id": f.Settled, "tenant": tenant, "action": f.SettledAction, "key": f.SettledKey, "fingerprint": "", "scope": nil}}},
		{Name: "outbox backlog (outboxBacklog)", SQL: outboxBacklog},
		{Name: "review list (operationsInReview)", SQL: operationsInReview, Args: []any{tenant, nil, uuid.Nil, 50, whole}},
		{Name: "review list, next page (operationsInReview)", SQL: operationsInReview, Args: []any{tenant, f.ReviewNextAt, f.ReviewNextID, 50, whole}},
		{Name: "review histories (operationEventsOf)", SQL: operationEventsOf, Args: []any{f.Review, tenant, whole}},
		{Name: "review unmatched (unmatchedOpen)", SQL: unmatchedOpen, Args: []any{tenant, nil, int64(0), 50, whole}},
		{Name: "approval requests (operationsAwaitingPage)", SQL: operationsAwaitingPage, Args: []any{pgx.StrictNamedArgs{
			"tenant": tenant, "scope": whole, "now": now, "after_at": nil, "after_id": uuid.Nil, "limit": 100}}},
		{Name: "in flight (operationsInFlight)", SQL: operationsInFlight, Args: []any{tenant, nil, uuid.Nil, 100, whole}},
		{Name: "resume (operationsReleasable)", SQL: operationsReleasable, Args: []any{pgx.StrictNamedArgs{
			"tenant": tenant, "provider": "", "action": "", "after_at": nil, "after_id": uuid.Nil, "limit": DefaultResumeBatch}}},
		{Name: "retried enqueue: by key (operationGetByKey)", SQL: operationGetByKey, Args: []any{tenant, f.SettledAction, f.SettledKey, whole}},
		{Name: "retried enqueue: key taken (operationKeyTaken)", SQL: operationKeyTaken, Args: []any{tenant, f.SettledAction, f.SettledKey}},
		{Name: "dispatch message: by id (operationGetAnyTenant)", SQL: operationGetAnyTenant, Args: []any{f.Settled}},
		{Name: "failed compensation: original (compensationOriginal)", SQL: compensationOriginal, Args: []any{f.Settled}},
		{Name: "replay: get (operationGet)", SQL: operationGet, Args: []any{f.Settled, tenant, whole}},
		{Name: "replay: targets (operationForeignTargets)", SQL: operationForeignTargets, Args: []any{f.Settled, "other", "live"}},
		{Name: "replay: history (operationEvents)", SQL: operationEvents, Args: []any{f.Settled, tenant}},
		{Name: "replay: history page (operationEventsPage)", SQL: operationEventsPage, Args: []any{f.Settled, tenant, int64(0), 100}},
		{Name: "replay: event (eventAppend)", SQL: eventAppend, Args: []any{f.Settled, now, EventReplayLookupAbsent, "reconciler:replay", detail}},
	}
	// GET /v1/operations and the console's Operations page take any
	// state, or none, from the caller; and a page deep in the history as
	// well as the newest.
	in := WholeTenant(tenant)
	middle := &OperationsCursor{CreatedAt: f.MiddleAt, ID: f.MiddleID}
	list := func(name string, filter OperationsFilter, after *OperationsCursor) bounded.Query {
		return bounded.Query{Name: "operations list (operationsPage) " + name, SQL: operationsPage,
			Args: []any{operationsPageArgs(in, filter, after, 100)}}
	}
	for _, status := range append([]Status{""}, Statuses...) {
		name := "status=" + string(status)
		queries = append(queries, list(name, OperationsFilter{Status: status}, nil),
			list(name+" deep page", OperationsFilter{Status: status}, middle))
	}
	// The console's filters: a key (one that exists, one that does not:
	// neither reads the history), a time range, and what no index holds
	// (an action, a provider, a client key that no operation has: the page
	// reads its window and stops). Its overview's counts by state read no
	// operation at all.
	// A key is a few descents of one index, whatever the ledger's size:
	// byKey holds it to the pages of those (a key taken as a filter read
	// the tenant's whole range of the index: docs/benchmarks.md, "The
	// large stage", "A run after schema 036 and 037").
	day := f.MiddleAt.Add(-24 * time.Hour)
	byKey := func(q bounded.Query) bounded.Query { q.MaxPages = 50; return q }
	queries = append(queries,
		byKey(list("key", OperationsFilter{Key: f.SettledKey}, nil)),
		byKey(list("key, no such", OperationsFilter{Key: "po-none"}, nil)),
		byKey(list("key and state", OperationsFilter{Key: f.SettledKey, Status: StatusSucceeded}, nil)),
		list("a day", OperationsFilter{Since: day, Until: f.MiddleAt}, nil),
		list("a day, failed", OperationsFilter{Since: day, Until: f.MiddleAt, Status: StatusFailed}, nil),
		list("action", OperationsFilter{Action: "order.create"}, nil),
		list("action, no such", OperationsFilter{Action: "refund.create"}, nil),
		list("provider, no such, deep page", OperationsFilter{Provider: "other"}, middle),
		list("client key, no such", OperationsFilter{ClientKey: "call-none"}, nil),
		list("provider and held", OperationsFilter{Provider: "other", Status: StatusHeld}, nil),
		list("everything", OperationsFilter{Status: StatusFailed, Key: f.SettledKey, Action: "order.create", Provider: "mock",
			ClientKey: "call-1", Since: day, Until: f.MiddleAt}, nil),
		bounded.Query{Name: "console overview by state (operationCountsOf)", SQL: operationCountsOf, Args: []any{tenant, whole}},
		bounded.Query{Name: "console overview by state, a scope (operationCountsOf)", SQL: operationCountsOf, Args: []any{tenant, "supply-eu"}},
	)
	// A prune (retention) selects a tenant's old terminal operations a
	// batch at a time, from the oldest and from where a batch ended,
	// reads them and their histories, walks the outbox and the webhook
	// events from their oldest rows, and deletes old statement runs and
	// records.
	cutoff := time.Now().Add(-30 * 24 * time.Hour)
	prunable := func(afterAt time.Time, afterID uuid.UUID) pgx.StrictNamedArgs {
		return pgx.StrictNamedArgs{"tenant": tenant, "cutoff": cutoff, "after_at": afterAt, "after_id": afterID,
			"terminal": terminalStatuses(), "limit": DefaultPruneBatch}
	}
	rowArgs := pgx.StrictNamedArgs{"after_id": int64(0), "limit": DefaultPruneBatch, "cutoff": cutoff}
	queries = append(queries,
		bounded.Query{Name: "prune: select a batch (operationsPrunable)", SQL: operationsPrunable, Args: []any{prunable(time.Time{}, uuid.Nil)}},
		bounded.Query{Name: "prune: select the next batch (operationsPrunable)", SQL: operationsPrunable, Args: []any{prunable(f.MiddleAt, f.MiddleID)}},
		bounded.Query{Name: "prune: read the batch (operationsOfPrune)", SQL: operationsOfPrune, Args: []any{f.Old}},
		bounded.Query{Name: "prune: read its histories (eventsOfPrune)", SQL: eventsOfPrune, Args: []any{f.Old}},
		bounded.Query{Name: "prune: webhook events (webhookEventsPrune)", SQL: webhookEventsPrune, Args: []any{rowArgs}},
		bounded.Query{Name: "prune: outbox (outboxPrune)", SQL: outboxPrune, Args: []any{rowArgs}},
		bounded.Query{Name: "prune: statement records (statementRecordsPrune)", SQL: statementRecordsPrune, Args: []any{
			pgx.StrictNamedArgs{"cutoff": cutoff, "limit": DefaultPruneBatch}}},
		bounded.Query{Name: "prune: statement runs (statementRunsPrune)", SQL: statementRunsPrune, Args: []any{
			pgx.StrictNamedArgs{"cutoff": cutoff, "limit": DefaultPruneBatch}}},
	)
	// A statement run starts (taking its provider's lease), reads a page's
	// operations by key and renews its lease after each page, reads the
	// successes of a day that its records do not name, a page at a time,
	// and ends: it marks duplicates, counts and deletes what needs nobody,
	// and records its findings; its report and the console page its
	// findings; GET /v1/reconciliations, the console and /metrics list the
	// runs and the last ones. Every statement of statement_records is
	// bounded by the run's own records (its primary key's and
	// statement_records_operation_idx's first column).
	run := uuid.New()
	start, err := statementRunStart.args(pgx.StrictNamedArgs{
		"id": run, "tenant": tenant, "provider": "mock", "since": day, "until": f.MiddleAt,
		"actor": "schedule", "lease": 2 * time.Minute, "now": now,
	})
	if err != nil {
		panic(err)
	}
	finish, err := statementRunFinish.args(pgx.StrictNamedArgs{
		"id": run, "provider": "mock", "status": RunComplete, "pages": 10,
		"error": nil, "findings": []byte(`{"matched": 1}`), "now": now,
	})
	if err != nil {
		panic(err)
	}
	queries = append(queries,
		bounded.Query{Name: "statement: start a run (statementRunStart)", SQL: statementRunStart.SQL, Args: start},
		bounded.Query{Name: "statement: renew the lease (statementLeaseRenew)", SQL: statementLeaseRenew, Args: []any{"mock", run, now, 2 * time.Minute}},
		bounded.Query{Name: "statement: mark duplicates (statementRecordsDuplicates)", SQL: statementRecordsDuplicates, Args: []any{run}},
		bounded.Query{Name: "statement: count findings (statementRecordsCount)", SQL: statementRecordsCount, Args: []any{run}},
		bounded.Query{Name: "statement: delete what needs nobody (statementRecordsDeleteSettled)", SQL: statementRecordsDeleteSettled, Args: []any{run}},
		bounded.Query{Name: "statement: add to the totals (statementTotalsAdd)", SQL: statementTotalsAdd, Args: []any{"mock", FindingMatched, int64(1)}},
		bounded.Query{Name: "statement: finish a run (statementRunFinish)", SQL: statementRunFinish.SQL, Args: finish},
		bounded.Query{Name: "statement: a run's findings, as a report lists them (statementRecordsPage)", SQL: statementRecordsPage, Args: []any{run, 0, 1000}},
		bounded.Query{Name: "statement: discard a dry run (statementRunDelete)", SQL: statementRunDelete, Args: []any{run}},
		bounded.Query{Name: "statement: a page's operations (operationsOfStatement)", SQL: operationsOfStatement, Args: []any{pgx.StrictNamedArgs{
			"refs": []string{ExternalKeyOfID(f.Settled), ExternalKeyOf(tenant, f.SettledAction, f.SettledKey)},
			"ids":  []uuid.UUID{f.Settled}, "provider": "mock"}}},
		bounded.Query{Name: "statement: unlisted successes (operationsUnlisted)", SQL: operationsUnlisted, Args: []any{"mock", day, f.MiddleAt, run, nil, uuid.Nil, 500}},
		bounded.Query{Name: "statement: unlisted successes, next page (operationsUnlisted)", SQL: operationsUnlisted, Args: []any{"mock", day, f.MiddleAt, run, day.Add(time.Hour), uuid.Nil, 500}},
		bounded.Query{Name: "statement runs (statementRunsPage)", SQL: statementRunsPage, Args: []any{tenant, whole, nil, uuid.Nil, 100}},
		bounded.Query{Name: "statement: last runs (statementRunsLast)", SQL: statementRunsLast, Args: []any{nil, nil}},
	)
	// A recovery (actledger recover) walks the window's queued,
	// retry_wait and dispatching operations a batch at a time, from the
	// first and from where a batch ended, and counts what it leaves
	// (unknown, review) and the oldest operation: what it reads is the
	// open work of the window, whatever the history. The widest window:
	// the whole ledger.
	window := func(afterAt *time.Time, afterID uuid.UUID) pgx.StrictNamedArgs {
		return pgx.StrictNamedArgs{"from": time.Time{}, "now": now, "after_at": afterAt, "after_id": afterID, "limit": DefaultRecoveryBatch}
	}
	for _, st := range recoverableStates {
		queries = append(queries,
			bounded.Query{Name: "recover: a batch of " + string(st) + " (operationsRecoverable)", SQL: operationsRecoverable[st], Args: []any{window(nil, uuid.Nil)}},
			bounded.Query{Name: "recover: the next batch of " + string(st) + " (operationsRecoverable)", SQL: operationsRecoverable[st], Args: []any{window(&f.MiddleAt, f.MiddleID)}})
	}
	queries = append(queries,
		bounded.Query{Name: "recover: what the window leaves (operationsLeftInWindow)", SQL: operationsLeftInWindow, Args: []any{pgx.StrictNamedArgs{"from": time.Time{}}}},
		bounded.Query{Name: "recover: the oldest operation (operationsOldest)", SQL: operationsOldest},
	)
	return queries
}
