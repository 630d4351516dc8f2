package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/ledger"
)

const action = "supplier.create_order"

// testTarget is the provider account and environment the tests' approvals
// are granted for, and their workers call.
var testTarget = ledger.Target{Account: "acct_test", Environment: "test"}

type fixture struct {
	pool     *pgxpool.Pool
	store    *ledger.Store
	tokens   *auth.Tokens
	tenant   uuid.UUID
	agent    auth.Principal
	approver auth.Principal
	// acme is the tenant with its tokens, for testfactory.Operation.
	acme testfactory.Tenant
}

func setup(t *testing.T) *fixture {
	t.Helper()
	return setupOn(t, testdb.New(t))
}

// setupOn is setup on a given pool (e.g. one behind a proxy).
func setupOn(t *testing.T, pool *pgxpool.Pool) *fixture {
	t.Helper()
	store := ledger.New(pool, ledger.Config{Subjects: broker.Subjects{Prefix: "TEST"}})
	tokens, err := auth.New(pool, store, auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	acme := testfactory.NewTenant(t, tokens, "acme-corp")
	return &fixture{pool: pool, store: store, tokens: tokens, tenant: acme.ID, agent: acme.Agent.Principal, approver: acme.Approver.Principal, acme: acme}
}

func (f *fixture) approve(t *testing.T, params string, maxUses int) ledger.Approval {
	t.Helper()
	a, err := f.store.CreateApproval(context.Background(), ledger.NewApproval{
		TenantID: f.tenant, ApproverTokenID: f.approver.TokenID, Action: action,
		Params: []byte(params), PolicyVersion: "p1", ExpiresAt: time.Now().Add(time.Hour), MaxUses: maxUses,
		Target: &testTarget,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (f *fixture) enqueue(key, params string, approval uuid.UUID) (ledger.Operation, bool, error) {
	return f.store.Enqueue(context.Background(), ledger.EnqueueRequest{
		TenantID: f.tenant, TokenID: f.agent.TokenID, Action: action, Key: key,
		Provider: "acme", Params: []byte(params), ApprovalID: approval,
	})
}

// queued is a new operation under a new one-use approval of params: the
// starting point of most ledger tests.
func (f *fixture) queued(t *testing.T, key, params string) (ledger.Operation, ledger.Approval) {
	t.Helper()
	a := f.approve(t, params, 1)
	op, _, err := f.enqueue(key, params, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	return op, a
}

func (f *fixture) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestFailedCommitLeavesNeitherOperationNorOutboxRow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.approve(t, `{"sku":"A-1"}`, 1)
	// Make the transaction fail at its last write, as a crash before
	// commit would.
	_, err := f.pool.Exec(context.Background(), `
CREATE FUNCTION fail_outbox() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'boom'; END $$;
CREATE TRIGGER fail_outbox BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION fail_outbox();`)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.enqueue("po-1", `{"sku":"A-1"}`, a.ID); err == nil {
		t.Fatal("enqueue succeeded although the outbox insert failed")
	}
	if n := f.count(t, `SELECT count(*) FROM operations`); n != 0 {
		t.Errorf("operations = %d, want 0", n)
	}
	if n := f.count(t, `SELECT count(*) FROM operation_events`); n != 0 {
		t.Errorf("events = %d, want 0", n)
	}
	if n := f.count(t, `SELECT uses FROM approvals WHERE id = $1`, a.ID); n != 0 {
		t.Errorf("approval uses = %d, want 0", n)
	}
}

func TestEnqueueWritesOperationEventAndOutboxRowTogether(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.approve(t, `{"sku":"A-1","qty":3}`, 1)
	op, replayed, err := f.enqueue("po-1", `{ "qty": 3, "sku": "A-1" }`, a.ID)
	if err != nil || replayed {
		t.Fatalf("enqueue: replayed=%v err=%v", replayed, err)
	}
	if op.Status != ledger.StatusQueued || op.Version != 1 || op.ExternalKey != ledger.ExternalKeyOf(f.tenant, action, "po-1") {
		t.Errorf("op = %+v", op)
	}
	if got, want := f.count(t, `SELECT count(*) FROM outbox WHERE msg_id = $1`, ledger.DispatchMsgID(op.ID, 1)), 1; got != want {
		t.Errorf("outbox rows = %d, want %d", got, want)
	}
	events, err := f.store.Events(context.Background(), ledger.WholeTenant(f.tenant), op.ID)
	if err != nil || len(events) != 1 || events[0].Kind != "created" || events[0].To != ledger.StatusQueued {
		t.Errorf("events = %+v, err %v", events, err)
	}
}

func TestConcurrentIdenticalEnqueueCreatesOneOperation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.approve(t, `{"sku":"A-1"}`, 1)
	const callers = 50
	ids := make([]uuid.UUID, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			op, _, err := f.enqueue("po-1", `{"sku":"A-1"}`, a.ID)
			ids[i], errs[i] = op.ID, err
		})
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("caller %d got %s, caller 0 got %s", i, ids[i], ids[0])
		}
	}
	if n := f.count(t, `SELECT count(*) FROM operations`); n != 1 {
		t.Errorf("operations = %d, want 1", n)
	}
	if n := f.count(t, `SELECT count(*) FROM outbox`); n != 1 {
		t.Errorf("outbox rows = %d, want 1", n)
	}
}

func TestMaxUsesOneApprovalCannotBeConsumedTwiceConcurrently(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.approve(t, `{"sku":"A-1"}`, 1)
	const callers = 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, used := 0, 0
	for i := range callers {
		wg.Go(func() {
			_, _, err := f.enqueue("po-"+string(rune('a'+i)), `{"sku":"A-1"}`, a.ID)
			var ae *ledger.ApprovalError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case errors.As(err, &ae) && ae.Code == ledger.ApprovalUsed:
				used++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
	wg.Wait()
	if created != 1 || used != callers-1 {
		t.Errorf("created %d, approval_used %d; want 1 and %d", created, used, callers-1)
	}
	if n := f.count(t, `SELECT count(*) FROM operations`); n != 1 {
		t.Errorf("operations = %d, want 1", n)
	}
}

func TestChangedParamsUnderSameKeyConflictAndRecordEvent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.approve(t, `{"sku":"A-1","qty":3}`, 2)
	first, _, err := f.enqueue("po-1", `{"sku":"A-1","qty":3}`, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = f.enqueue("po-1", `{"sku":"A-1","qty":4}`, a.ID)
	if !errors.Is(err, ledger.ErrKeyConflict) {
		t.Fatalf("err = %v, want ErrKeyConflict", err)
	}
	if n := f.count(t, `SELECT count(*) FROM outbox`); n != 1 {
		t.Errorf("outbox rows = %d, want 1 (nothing sent for the conflict)", n)
	}
	if n := f.count(t, `SELECT count(*) FROM operation_events WHERE operation_id = $1 AND kind = 'key_conflict'`, first.ID); n != 1 {
		t.Errorf("conflict events = %d, want 1", n)
	}
	if n := f.count(t, `SELECT uses FROM approvals WHERE id = $1`, a.ID); n != 1 {
		t.Errorf("approval uses = %d, want 1 (a conflict consumes nothing)", n)
	}
}

func TestReplayDoesNotConsumeAnotherUse(t *testing.T) {
	t.Parallel()
	f := setup(t)
	first, a := f.queued(t, "", `{"sku":"A-1"}`)
	if first.Key != a.ID.String() {
		t.Errorf("key = %q, want the approval id %s when omitted", first.Key, a.ID)
	}
	again, replayed, err := f.enqueue("", `{"sku":"A-1"}`, a.ID)
	if err != nil || !replayed || again.ID != first.ID {
		t.Fatalf("replay: id %s replayed %v err %v", again.ID, replayed, err)
	}
}

func TestApprovalProblemsAreNamed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	expired, err := f.store.CreateApproval(ctx, ledger.NewApproval{
		TenantID: f.tenant, ApproverTokenID: f.approver.TokenID, Action: action,
		Params: []byte(`{"sku":"A-1"}`), PolicyVersion: "p1", ExpiresAt: time.Now().Add(-time.Second),
		Target: &testTarget,
	})
	if err != nil {
		t.Fatal(err)
	}
	revoked := f.approve(t, `{"sku":"A-1"}`, 1)
	if _, _, err := f.store.RevokeApproval(ctx, ledger.WholeTenant(f.tenant), revoked.ID, "test"); err != nil {
		t.Fatal(err)
	}
	otherAction, err := f.store.CreateApproval(ctx, ledger.NewApproval{
		TenantID: f.tenant, ApproverTokenID: f.approver.TokenID, Action: "email.send",
		Params: []byte(`{"sku":"A-1"}`), PolicyVersion: "p1", ExpiresAt: time.Now().Add(time.Hour),
		Target: &testTarget,
	})
	if err != nil {
		t.Fatal(err)
	}
	good := f.approve(t, `{"sku":"A-1"}`, 1)

	tests := []struct {
		name     string
		approval uuid.UUID
		params   string
		want     ledger.ApprovalCode
	}{
		{"expired", expired.ID, `{"sku":"A-1"}`, ledger.ApprovalExpired},
		{"revoked", revoked.ID, `{"sku":"A-1"}`, ledger.ApprovalRevoked},
		{"other action", otherAction.ID, `{"sku":"A-1"}`, ledger.ApprovalMismatch},
		{"other params", good.ID, `{"sku":"A-2"}`, ledger.ApprovalMismatch},
		{"missing", uuid.New(), `{"sku":"A-1"}`, ledger.ApprovalMismatch},
	}
	for i, tt := range tests {
		_, _, err := f.enqueue("po-"+tt.name, tt.params, tt.approval)
		var ae *ledger.ApprovalError
		if !errors.As(err, &ae) || ae.Code != tt.want {
			t.Errorf("%d %s: err = %v, want %s", i, tt.name, err, tt.want)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM operations`); n != 0 {
		t.Errorf("operations = %d, want 0", n)
	}
}

func TestStaleWriterCannotOverwriteNewerState(t *testing.T) {
	t.Parallel()
	f := setup(t)
	op, _ := f.queued(t, "po-1", `{"sku":"A-1"}`)
	ctx := context.Background()
	claimed, err := f.store.Transition(ctx, ledger.Change{
		ID: op.ID, From: ledger.StatusQueued, Version: op.Version, To: ledger.StatusDispatching,
		Kind: "claimed", Actor: "worker:a", LeaseOwner: "a", LeaseUntil: time.Now().Add(time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	// A second worker that read version 1 tries the same claim.
	_, err = f.store.Transition(ctx, ledger.Change{
		ID: op.ID, From: ledger.StatusQueued, Version: op.Version, To: ledger.StatusDispatching,
		Kind: "claimed", Actor: "worker:b", LeaseOwner: "b", LeaseUntil: time.Now().Add(time.Minute),
	})
	if !errors.Is(err, ledger.ErrStale) {
		t.Fatalf("second claim err = %v, want ErrStale", err)
	}
	done, err := f.store.Transition(ctx, ledger.Change{
		ID: op.ID, From: ledger.StatusDispatching, Version: claimed.Version, To: ledger.StatusSucceeded,
		Kind: "provider_answered", Actor: "worker:a", ProviderReference: "ord_1", Attempted: true, SentAt: time.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if done.LeaseOwner != nil || done.Attempts != 1 || *done.ProviderReference != "ord_1" || done.Version != 3 {
		t.Errorf("after success: %+v", done)
	}
	// The worker that lost keeps what it saw as evidence, not as state.
	if err := f.store.AppendEvent(ctx, op.ID, "stale_result", "worker:b", map[string]string{"saw": "timeout"}); err != nil {
		t.Fatal(err)
	}
	got, _ := f.store.Get(ctx, ledger.WholeTenant(f.tenant), op.ID)
	if got.Status != ledger.StatusSucceeded {
		t.Errorf("status = %s, want succeeded", got.Status)
	}
}

func TestTransitionTableIsEnforced(t *testing.T) {
	t.Parallel()
	f := setup(t)
	op, _ := f.queued(t, "po-1", `{"sku":"A-1"}`)
	_, err := f.store.Transition(context.Background(), ledger.Change{
		ID: op.ID, From: ledger.StatusQueued, Version: op.Version, To: ledger.StatusFailed, Kind: "x", Actor: "test",
	})
	if !errors.Is(err, ledger.ErrBadTransition) {
		t.Errorf("queued → failed: err = %v, want ErrBadTransition", err)
	}
}

func TestEventsAreAppendOnly(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.approve(t, `{"sku":"A-1"}`, 1)
	if _, _, err := f.enqueue("po-1", `{"sku":"A-1"}`, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(context.Background(), `UPDATE operation_events SET kind = 'x'`); err == nil {
		t.Error("updating an event succeeded")
	}
	if _, err := f.pool.Exec(context.Background(), `DELETE FROM operation_events`); err == nil {
		t.Error("deleting an event succeeded")
	}
}

func TestRevokingApprovalHoldsUnsentOperations(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.approve(t, `{"sku":"A-1"}`, 2)
	op, _, err := f.enqueue("po-1", `{"sku":"A-1"}`, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, held, err := f.store.RevokeApproval(context.Background(), ledger.WholeTenant(f.tenant), a.ID, "approver:test")
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || held[0].ID != op.ID || held[0].Status != ledger.StatusHeld {
		t.Fatalf("held = %+v", held)
	}
	_, _, err = f.enqueue("po-2", `{"sku":"A-1"}`, a.ID)
	var ae *ledger.ApprovalError
	if !errors.As(err, &ae) || ae.Code != ledger.ApprovalRevoked {
		t.Errorf("enqueue after revoke: %v, want approval_revoked", err)
	}
}

func TestRevokedTokenHoldsItsUnsentOperations(t *testing.T) {
	t.Parallel()
	f := setup(t)
	op, _ := f.queued(t, "po-1", `{"sku":"A-1"}`)
	held, err := f.tokens.Revoke(context.Background(), f.agent.Name, "cli")
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || held[0].ID != op.ID || held[0].Status != ledger.StatusHeld {
		t.Errorf("held = %+v", held)
	}
}

func TestOtherTenantsOperationIsNotFound(t *testing.T) {
	t.Parallel()
	f := setup(t)
	op, _ := f.queued(t, "po-1", `{"sku":"A-1"}`)
	other := uuid.New()
	if _, err := f.store.Get(context.Background(), ledger.WholeTenant(other), op.ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Get from other tenant: %v, want ErrNotFound", err)
	}
	if _, err := f.store.Events(context.Background(), ledger.WholeTenant(other), op.ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Events from other tenant: %v, want ErrNotFound", err)
	}
}

func TestFingerprintIgnoresKeyOrderAndWhitespaceButNotValues(t *testing.T) {
	t.Parallel()
	base := `{"sku":"A-1","qty":3,"ship":{"to":"Oslo","by":"2026-12-01"}}`
	tests := []struct {
		name   string
		params string
		same   bool
	}{
		{"identical", base, true},
		{"key order", `{"ship":{"by":"2026-12-01","to":"Oslo"},"qty":3,"sku":"A-1"}`, true},
		{"whitespace", "{ \"sku\" : \"A-1\",\n\t\"qty\" : 3, \"ship\": {\"to\":\"Oslo\", \"by\":\"2026-12-01\"} }", true},
		{"number spelling", `{"sku":"A-1","qty":3.0,"ship":{"to":"Oslo","by":"2026-12-01"}}`, true},
		{"escaped string", `{"sku":"A\u002d1","qty":3,"ship":{"to":"Oslo","by":"2026-12-01"}}`, true},
		{"other quantity", `{"sku":"A-1","qty":4,"ship":{"to":"Oslo","by":"2026-12-01"}}`, false},
		{"quantity as string", `{"sku":"A-1","qty":"3","ship":{"to":"Oslo","by":"2026-12-01"}}`, false},
		{"nested value", `{"sku":"A-1","qty":3,"ship":{"to":"Bergen","by":"2026-12-01"}}`, false},
		{"extra field", `{"sku":"A-1","qty":3,"ship":{"to":"Oslo","by":"2026-12-01"},"note":""}`, false},
	}
	_, want, err := ledger.Canonicalize([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, got, err := ledger.Canonicalize([]byte(tt.params))
			if err != nil {
				t.Fatal(err)
			}
			if (got == want) != tt.same {
				t.Errorf("fingerprint %s vs %s: same=%v, want %v", got, want, got == want, tt.same)
			}
		})
	}
}

func TestCanonicalizeRejectsNonObjects(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `[]`, `"x"`, `3`, `{"a":`, `{"a":1}{`} {
		if _, _, err := ledger.Canonicalize([]byte(in)); err == nil {
			t.Errorf("Canonicalize(%q) succeeded", in)
		}
	}
	canonical, fp, err := ledger.Canonicalize([]byte(`{"b":1,"a":[true,null]}`))
	if err != nil || string(canonical) != `{"a":[true,null],"b":1}` || len(fp) != len(ledger.FingerprintPrefix)+64 {
		t.Errorf("canonical %s fp %s err %v", canonical, fp, err)
	}
	var v map[string]any
	if err := json.Unmarshal(canonical, &v); err != nil {
		t.Error(err)
	}
}

// TestSQLTenantIDTextAgreesWithGo: review subjects are written by Postgres
// (uuid::text of the tenant id, in Transition) and read by Go
// (ledger.ReviewSubject, uuid.UUID.String): the two texts must agree.
func TestSQLTenantIDTextAgreesWithGo(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	for _, id := range []uuid.UUID{uuid.New(), uuid.MustParse("ABCDEF01-2345-6789-ABCD-EF0123456789"), uuid.Nil} {
		var got string
		if err := pool.QueryRow(context.Background(), `SELECT $1::uuid::text`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := id.String(); got != want {
			t.Errorf("Postgres writes %q for tenant id %s, Go reads %q", got, id, want)
		}
	}
}

// TestGetByExternalKeyFindsOnlyTheExactKey: evidence names an operation by
// its external key (derived from its business identity, schema 041). Only
// the exact spelling ExternalKeyOf makes finds the operation; another
// spelling of it, the key its id would have had before schema 041, or a
// key of no operation, is not found.
func TestGetByExternalKeyFindsOnlyTheExactKey(t *testing.T) {
	t.Parallel()
	f := setup(t)
	op, _ := f.queued(t, "po-1", `{"sku":"A-1"}`)
	for _, tc := range []struct {
		key   string
		found bool
	}{
		{op.ExternalKey, true},
		{ledger.ExternalKeyOf(f.tenant, action, "po-1"), true},
		{ledger.ExternalKeyOfID(op.ID), false},
		{strings.ToUpper(op.ExternalKey), false},
		{strings.TrimPrefix(op.ExternalKey, "al_"), false},
		{"al_" + strings.ReplaceAll(strings.TrimPrefix(op.ExternalKey, "al_"), "-", ""), false},
		{"al_" + strings.ReplaceAll(op.ID.String(), "-", ""), false},
		{"al_{" + op.ID.String() + "}", false},
		{op.ID.String(), false},
		{ledger.ExternalKeyOfID(uuid.New()), false},
		{"", false},
	} {
		got, err := f.store.GetByExternalKey(context.Background(), tc.key)
		switch {
		case tc.found && (err != nil || got.ID != op.ID):
			t.Errorf("GetByExternalKey(%q) = %s, %v; want operation %s", tc.key, got.ID, err, op.ID)
		case !tc.found && !errors.Is(err, ledger.ErrNotFound):
			t.Errorf("GetByExternalKey(%q) = %s, %v; want ErrNotFound", tc.key, got.ID, err)
		}
	}
}

// TestEventDetailTimesAreUTC: the contract's times are RFC 3339 in UTC,
// and an event's detail is shown as it is stored; a time handed in another
// zone (pgx reads timestamptz in the process's local zone, a provider
// call's clock is local) is stored as the same instant in UTC.
func TestEventDetailTimesAreUTC(t *testing.T) {
	t.Parallel()
	f := setup(t)
	op, _ := f.queued(t, "po-1", `{"sku":"A-1"}`)
	ist := time.FixedZone("IST", 5*3600+1800)
	at := time.Date(2026, 11, 30, 21, 42, 24, 500, ist)
	ctx := context.Background()
	if err := f.store.AppendEvent(ctx, op.ID, "note", "test", map[string]any{"at": at, "until": &at, "n": 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Transition(ctx, ledger.Change{
		ID: op.ID, From: ledger.StatusQueued, Version: op.Version, To: ledger.StatusHeld, Kind: "approval_revoked", Actor: "test",
		Detail: map[string]any{"at": at},
	}); err != nil {
		t.Fatal(err)
	}
	events, err := f.store.Events(ctx, ledger.WholeTenant(f.tenant), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := at.UTC().Format(time.RFC3339Nano)
	for _, e := range events[1:] {
		var detail map[string]any
		if err := json.Unmarshal(e.Detail, &detail); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"at", "until"} {
			if got, ok := detail[k]; ok && got != want {
				t.Errorf("%s event: detail.%s = %v, want %s", e.Kind, k, got, want)
			}
		}
	}
}
