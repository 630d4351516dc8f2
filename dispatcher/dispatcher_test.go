package dispatcher_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/dispatcher"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testnats"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/mocksupplier"
	"github.com/actledger/actledger/outbox"
	"github.com/actledger/actledger/provider"
)

const action = "supplier.create_order"

// contract is the provider contract a test runs against.
type contract struct {
	idempotency bool
	lookupLag   time.Duration // <0: no lookup
	maxAttempts int
}

type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

type fixture struct {
	t        *testing.T
	pool     *pgxpool.Pool
	broker   *broker.Broker
	store    *ledger.Store
	clock    *clock
	supplier *mocksupplier.Server
	registry *provider.Registry
	tenant   uuid.UUID
	agent    auth.Principal
	approver auth.Principal
	lease    time.Duration
	running  []interface{ Stop() }
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func setup(t *testing.T, c contract, mode mocksupplier.Mode) *fixture {
	t.Helper()
	return setupWith(t, c, mode, testdb.New(t), testnats.New(t))
}

func setupWith(t *testing.T, c contract, mode mocksupplier.Mode, pool *pgxpool.Pool, b *broker.Broker) *fixture {
	t.Helper()
	f := &fixture{t: t, pool: pool, broker: b, clock: &clock{}, lease: 2 * time.Second}
	f.store = ledger.New(f.pool, ledger.Config{Now: f.clock.Now})
	lag := c.lookupLag
	if lag < 0 {
		lag = 0
	}
	f.supplier = mocksupplier.New(mocksupplier.Config{Idempotency: mode, LookupLag: lag, Logger: quiet()})
	srv := httptest.NewServer(f.supplier)
	t.Cleanup(func() { srv.Close(); f.supplier.Close() })

	var yaml strings.Builder
	fmt.Fprintf(&yaml, "providers:\n  acme:\n    base_url: %s\n    account: acct_test\n    environment: test\n    timeout: 1s\n", srv.URL)
	yaml.WriteString("    create: {method: POST, path: /v1/orders}\n    reference_param: client_reference\n    reference_field: id\n")
	if c.idempotency {
		yaml.WriteString("    idempotency: {header: Idempotency-Key, retention: 24h}\n")
	}
	if c.lookupLag >= 0 {
		fmt.Fprintf(&yaml, "    lookup: {path: \"/v1/orders?client_reference={reference}\", visibility_lag: %s}\n", c.lookupLag)
	}
	fmt.Fprintf(&yaml, "    retry: {max_attempts: %d, initial: 50ms, max: 200ms, max_elapsed: 30s}\n", max(c.maxAttempts, 5))
	yaml.WriteString("    review: {owner: supply-ops, deadline: 4h}\nactions:\n  supplier.create_order: {provider: acme}\n")
	reg, err := provider.Parse([]byte(yaml.String()))
	if err != nil {
		t.Fatal(err)
	}
	f.registry = reg

	tokens := auth.New(f.pool, f.store)
	principal := func(role auth.Role) auth.Principal {
		created, err := tokens.Create(context.Background(), "acme-corp", role, "")
		if err != nil {
			t.Fatal(err)
		}
		p, err := tokens.Authenticate(context.Background(), created.Secret)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	f.agent, f.approver = principal(auth.RoleAgent), principal(auth.RoleApprover)
	f.tenant = f.agent.TenantID
	t.Cleanup(f.stopAll)
	return f
}

// enqueue approves params and enqueues them under key, as the API does.
func (f *fixture) enqueue(key, params string) ledger.Operation {
	f.t.Helper()
	ctx := context.Background()
	a, err := f.store.CreateApproval(ctx, ledger.NewApproval{
		TenantID: f.tenant, ApproverTokenID: f.approver.TokenID, Action: action,
		Params: []byte(params), PolicyVersion: "p1", ExpiresAt: f.clock.Now().Add(time.Hour),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	op, _, err := f.store.Enqueue(ctx, ledger.EnqueueRequest{
		TenantID: f.tenant, TokenID: f.agent.TokenID, Action: action, Key: key,
		Provider: "acme", Params: []byte(params), ApprovalID: a.ID,
	}, f.broker.DispatchSubject("acme"))
	if err != nil {
		f.t.Fatal(err)
	}
	return op
}

// startPipeline starts a relay, n dispatchers and a sweeper; it returns
// the dispatchers.
func (f *fixture) startPipeline(n int) []*dispatcher.Dispatcher {
	f.t.Helper()
	relay := outbox.NewRelay(f.pool, f.broker.JetStream(), outbox.Config{PollInterval: 100 * time.Millisecond, Logger: quiet()})
	f.start(relay)
	var ds []*dispatcher.Dispatcher
	for i := range n {
		d, err := dispatcher.New(f.store, f.broker, dispatcher.Config{
			Registry: f.registry, LeaseDuration: f.lease, WorkerID: fmt.Sprintf("w%d", i), Concurrency: 4, Logger: quiet(),
		})
		if err != nil {
			f.t.Fatal(err)
		}
		ds = append(ds, d)
	}
	for _, d := range ds {
		f.start(d)
	}
	f.start(dispatcher.NewLeaseSweeper(f.store, f.broker, dispatcher.SweeperConfig{
		Registry: f.registry, Interval: 100 * time.Millisecond, StuckAfter: 10 * time.Second, Logger: quiet(),
	}))
	return ds
}

func (f *fixture) start(c interface {
	Start(context.Context) error
	Stop()
}) {
	f.t.Helper()
	if err := c.Start(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	f.running = append(f.running, c)
}

func (f *fixture) stopAll() {
	for i := len(f.running) - 1; i >= 0; i-- {
		f.running[i].Stop()
	}
	f.running = nil
}

// waitStatus polls the ledger until op reaches want.
func (f *fixture) waitStatus(op ledger.Operation, want ledger.Status, timeout time.Duration) ledger.Operation {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, err := f.store.Get(context.Background(), f.tenant, op.ID)
		if err != nil {
			f.t.Fatal(err)
		}
		if got.Status == want {
			return got
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("operation %s is %s after %s, want %s; events:\n%s", op.Key, got.Status, timeout, want, f.history(op))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) history(op ledger.Operation) string {
	events, _ := f.store.Events(context.Background(), f.tenant, op.ID)
	var b strings.Builder
	for _, e := range events {
		from := ""
		if e.From != nil {
			from = string(*e.From)
		}
		fmt.Fprintf(&b, "  %s %s %s→%s %s\n", e.At.Format("15:04:05.000"), e.Kind, from, e.To, e.Detail)
	}
	return b.String()
}

func (f *fixture) eventKinds(op ledger.Operation) []string {
	events, err := f.store.Events(context.Background(), f.tenant, op.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	kinds := make([]string, len(events))
	for i, e := range events {
		kinds[i] = e.Kind
	}
	return kinds
}

// orders is the supplier's real count for op's external key.
func (f *fixture) orders(op ledger.Operation) int { return f.supplier.Orders(op.ExternalKey) }

func (f *fixture) creates(op ledger.Operation) int {
	return len(f.supplier.CreateRequests(op.ExternalKey))
}

func TestLostResponseWithKeysHonouredCreatesOneOrder(t *testing.T) {
	t.Parallel()
	f := setup(t, contract{idempotency: true, lookupLag: -1}, mocksupplier.Honour)
	f.supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := f.enqueue("po-1", `{"sku":"A-1","qty":3}`)
	f.startPipeline(1)
	done := f.waitStatus(op, ledger.StatusSucceeded, 15*time.Second)
	if got := f.orders(op); got != 1 {
		t.Errorf("supplier orders = %d, want 1", got)
	}
	if done.ProviderReference == nil || !strings.HasPrefix(*done.ProviderReference, "ord_") || done.Attempts != 2 {
		t.Errorf("succeeded with reference %v after %d attempts, want ord_… after 2", done.ProviderReference, done.Attempts)
	}
}

func TestLostResponseWithKeysIgnoredIsSettledByLookupAfterTheLag(t *testing.T) {
	t.Parallel()
	const lag = 700 * time.Millisecond
	f := setup(t, contract{lookupLag: lag}, mocksupplier.Ignore)
	f.supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := f.enqueue("po-1", `{"sku":"A-1","qty":3}`)
	f.startPipeline(1)
	done := f.waitStatus(op, ledger.StatusSucceeded, 15*time.Second)
	if got := f.orders(op); got != 1 {
		t.Errorf("supplier orders = %d, want 1", got)
	}
	if got := f.creates(op); got != 1 {
		t.Errorf("create requests = %d, want 1 (none after the lost response)", got)
	}
	if done.Attempts != 1 || done.ProviderReference == nil {
		t.Errorf("attempts %d reference %v", done.Attempts, done.ProviderReference)
	}
	if kinds := strings.Join(f.eventKinds(op), ","); !strings.Contains(kinds, "lookup_found") {
		t.Errorf("events %s: want a lookup_found", kinds)
	}
}

func TestLostResponseWithoutKeyOrLookupGoesToReview(t *testing.T) {
	t.Parallel()
	f := setup(t, contract{lookupLag: -1}, mocksupplier.Ignore)
	f.supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := f.enqueue("po-1", `{"sku":"A-1"}`)
	f.startPipeline(1)
	done := f.waitStatus(op, ledger.StatusReview, 15*time.Second)
	if got := f.orders(op); got != 1 {
		t.Errorf("supplier orders = %d, want 1", got)
	}
	if *done.ReviewReason != dispatcher.ReasonOutcomeUnknown || *done.ReviewOwner != "supply-ops" || done.ReviewDeadline == nil {
		t.Errorf("review %v %v %v", *done.ReviewReason, *done.ReviewOwner, done.ReviewDeadline)
	}
	if kinds := strings.Join(f.eventKinds(op), ","); kinds != "created,claimed,attempt,needs_review" {
		t.Errorf("events = %s", kinds)
	}
	time.Sleep(300 * time.Millisecond)
	if got := f.creates(op); got != 1 {
		t.Errorf("create requests = %d, want 1", got)
	}
}

func TestWorkerKilledAfterTheCallIsSettledByLookupNotASecondCreate(t *testing.T) {
	t.Parallel()
	f := setup(t, contract{lookupLag: 300 * time.Millisecond}, mocksupplier.Ignore)
	f.lease = time.Second + 100*time.Millisecond
	op := f.enqueue("po-1", `{"sku":"A-1"}`)
	ds := f.startPipeline(1)
	var killed atomic.Bool
	ds[0].SetCrashAfterCall(func(ledger.Operation) bool { return !killed.Swap(true) })
	done := f.waitStatus(op, ledger.StatusSucceeded, 20*time.Second)
	if got, creates := f.orders(op), f.creates(op); got != 1 || creates != 1 {
		t.Errorf("orders %d, create requests %d; want 1 and 1", got, creates)
	}
	kinds := strings.Join(f.eventKinds(op), ",")
	if !strings.Contains(kinds, "lease_expired") || !strings.Contains(kinds, "lookup_found") {
		t.Errorf("events %s: want lease_expired then lookup_found", kinds)
	}
	if done.ProviderReference == nil {
		t.Error("no provider reference recorded")
	}
}

func TestDuplicatedMessagesAndRacingWorkersMakeOneCall(t *testing.T) {
	t.Parallel()
	f := setup(t, contract{idempotency: true, lookupLag: 0}, mocksupplier.Ignore)
	f.supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.Delay, MS: 200})
	op := f.enqueue("po-1", `{"sku":"A-1"}`)
	// Two more copies of the dispatch message, past JetStream's dedup.
	for i := range 2 {
		m := ledger.RedispatchOutbox(f.broker.DispatchSubject("acme"), op.ID, op.Version, time.Now().Add(time.Duration(i)))
		if err := outbox.Insert(context.Background(), f.pool, m); err != nil {
			t.Fatal(err)
		}
	}
	f.startPipeline(4)
	f.waitStatus(op, ledger.StatusSucceeded, 15*time.Second)
	time.Sleep(500 * time.Millisecond) // let every copy be handled
	if got, creates := f.orders(op), f.creates(op); got != 1 || creates != 1 {
		t.Errorf("orders %d, create requests %d; want 1 and 1", got, creates)
	}
}

func TestTwoUnavailableAnswersThenCreatedSucceedsAfterThreeAttempts(t *testing.T) {
	t.Parallel()
	f := setup(t, contract{idempotency: true, lookupLag: 0}, mocksupplier.Honour)
	f.supplier.SetFaults("",
		mocksupplier.Fault{Kind: mocksupplier.UnavailableBeforeCommit, RetryAfterS: 1},
		mocksupplier.Fault{Kind: mocksupplier.UnavailableBeforeCommit, RetryAfterS: 1})
	op := f.enqueue("po-1", `{"sku":"A-1"}`)
	f.startPipeline(1)
	done := f.waitStatus(op, ledger.StatusSucceeded, 20*time.Second)
	if done.Attempts != 3 || f.orders(op) != 1 {
		t.Errorf("attempts %d orders %d; want 3 and 1", done.Attempts, f.orders(op))
	}
	kinds := strings.Join(f.eventKinds(op), ",")
	if kinds != "created,claimed,attempt,claimed,attempt,claimed,attempt" {
		t.Errorf("events = %s", kinds)
	}
}

func TestRetriesExhaustedGoToReview(t *testing.T) {
	t.Parallel()
	f := setup(t, contract{idempotency: true, lookupLag: 0, maxAttempts: 2}, mocksupplier.Honour)
	f.registry = mustRegistryWithAttempts(t, f, 2)
	f.supplier.SetFaults("",
		mocksupplier.Fault{Kind: mocksupplier.RateLimit429}, mocksupplier.Fault{Kind: mocksupplier.RateLimit429},
		mocksupplier.Fault{Kind: mocksupplier.RateLimit429})
	op := f.enqueue("po-1", `{"sku":"A-1"}`)
	f.startPipeline(1)
	done := f.waitStatus(op, ledger.StatusReview, 20*time.Second)
	if *done.ReviewReason != dispatcher.ReasonRetriesExhausted || done.Attempts != 2 || f.orders(op) != 0 {
		t.Errorf("reason %s attempts %d orders %d", *done.ReviewReason, done.Attempts, f.orders(op))
	}
}

func mustRegistryWithAttempts(t *testing.T, f *fixture, n int) *provider.Registry {
	t.Helper()
	pc, _ := f.registry.Provider("acme")
	cp := *pc
	cp.Retry.MaxAttempts = n
	reg, err := provider.NewRegistry(provider.File{
		Providers: map[string]provider.Config{"acme": cp},
		Actions:   map[string]provider.Action{action: {Provider: "acme"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestRejectedOperationFailsWithNoOrder(t *testing.T) {
	t.Parallel()
	f := setup(t, contract{idempotency: true, lookupLag: 0}, mocksupplier.Honour)
	f.supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.Reject422})
	op := f.enqueue("po-1", `{"sku":"A-1"}`)
	f.startPipeline(1)
	done := f.waitStatus(op, ledger.StatusFailed, 15*time.Second)
	if f.orders(op) != 0 || done.Attempts != 1 {
		t.Errorf("orders %d attempts %d; want 0 and 1", f.orders(op), done.Attempts)
	}
}

func TestApprovalExpiredBeforeDispatchIsHeldWithNoOrder(t *testing.T) {
	t.Parallel()
	f := setup(t, contract{idempotency: true, lookupLag: 0}, mocksupplier.Honour)
	op := f.enqueue("po-1", `{"sku":"A-1"}`)
	f.clock.Advance(2 * time.Hour) // the approval lapses while the job waits
	f.startPipeline(1)
	f.waitStatus(op, ledger.StatusHeld, 15*time.Second)
	if got := f.creates(op); got != 0 {
		t.Errorf("create requests = %d, want 0", got)
	}
	if kinds := strings.Join(f.eventKinds(op), ","); kinds != "created,claimed,approval_expired" {
		t.Errorf("events = %s", kinds)
	}
}

func TestApprovalRevokedBeforeDispatchIsHeldWithNoOrder(t *testing.T) {
	t.Parallel()
	f := setup(t, contract{idempotency: true, lookupLag: 0}, mocksupplier.Honour)
	op := f.enqueue("po-1", `{"sku":"A-1"}`)
	if _, _, err := f.store.RevokeApproval(context.Background(), f.tenant, op.ApprovalID, "approver:test"); err != nil {
		t.Fatal(err)
	}
	f.startPipeline(1)
	f.waitStatus(op, ledger.StatusHeld, 5*time.Second)
	time.Sleep(500 * time.Millisecond) // the dispatch message arrives and is ignored
	if got := f.creates(op); got != 0 {
		t.Errorf("create requests = %d, want 0", got)
	}
}

func TestRevokedTokenBeforeDispatchIsHeldWithNoOrder(t *testing.T) {
	t.Parallel()
	f := setup(t, contract{idempotency: true, lookupLag: 0}, mocksupplier.Honour)
	op := f.enqueue("po-1", `{"sku":"A-1"}`)
	// Revoke the token behind the ledger's back, as a token revoked
	// between the claim and the call would look to the worker.
	if _, err := f.pool.Exec(context.Background(), `UPDATE api_tokens SET revoked_at = now() WHERE id = $1`, f.agent.TokenID); err != nil {
		t.Fatal(err)
	}
	f.startPipeline(1)
	f.waitStatus(op, ledger.StatusHeld, 15*time.Second)
	if got := f.creates(op); got != 0 {
		t.Errorf("create requests = %d, want 0", got)
	}
}

func TestTwoApprovedOperationsWithIdenticalParamsMakeTwoOrders(t *testing.T) {
	t.Parallel()
	f := setup(t, contract{idempotency: true, lookupLag: 0}, mocksupplier.Honour)
	a := f.enqueue("po-1", `{"sku":"A-1","qty":3}`)
	b := f.enqueue("po-2", `{"sku":"A-1","qty":3}`)
	f.startPipeline(1)
	f.waitStatus(a, ledger.StatusSucceeded, 15*time.Second)
	f.waitStatus(b, ledger.StatusSucceeded, 15*time.Second)
	if f.orders(a) != 1 || f.orders(b) != 1 || f.supplier.TotalOrders() != 2 {
		t.Errorf("orders %d + %d, total %d; want 1 + 1 = 2", f.orders(a), f.orders(b), f.supplier.TotalOrders())
	}
}

func TestRestartDuringRetryWaitStillRetriesOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, contract{idempotency: true, lookupLag: 0}, mocksupplier.Honour)
	f.supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.UnavailableBeforeCommit, RetryAfterS: 2})
	op := f.enqueue("po-1", `{"sku":"A-1"}`)
	f.startPipeline(1)
	waiting := f.waitStatus(op, ledger.StatusRetryWait, 15*time.Second)
	f.stopAll() // the whole process goes away during the backoff

	if !waiting.NextAttemptAt.After(time.Now()) {
		t.Fatalf("retry due at %s is not in the future", waiting.NextAttemptAt)
	}
	f.startPipeline(1) // a new process, with nothing in memory
	done := f.waitStatus(op, ledger.StatusSucceeded, 15*time.Second)
	creates := f.supplier.CreateRequests(op.ExternalKey)
	if len(creates) != 2 || f.orders(op) != 1 || done.Attempts != 2 {
		t.Fatalf("create requests %d, orders %d, attempts %d; want 2, 1, 2", len(creates), f.orders(op), done.Attempts)
	}
	if gap := creates[1].Sub(creates[0]); gap < 2*time.Second {
		t.Errorf("retry came %s after the 503, before its Retry-After of 2s", gap)
	}
}

func TestPausedWorkStaysQueuedUntilResume(t *testing.T) {
	t.Parallel()
	f := setup(t, contract{idempotency: true, lookupLag: 0}, mocksupplier.Honour)
	if err := f.store.PauseDispatch(context.Background(), f.tenant, "acme", "", "operator:test"); err != nil {
		t.Fatal(err)
	}
	op := f.enqueue("po-1", `{"sku":"A-1"}`)
	f.startPipeline(1)
	time.Sleep(time.Second)
	if got, _ := f.store.Get(context.Background(), f.tenant, op.ID); got.Status != ledger.StatusQueued || f.creates(op) != 0 {
		t.Fatalf("paused: status %s, create requests %d; want queued and 0", got.Status, f.creates(op))
	}
	_, err := f.store.ResumeDispatch(context.Background(), f.tenant, "acme", "", func(tx pgx.Tx, released []ledger.Requeue) error {
		for _, r := range released {
			if err := outbox.Insert(context.Background(), tx, ledger.RedispatchOutbox(f.broker.DispatchSubject(r.Provider), r.ID, r.Version, time.Now())); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f.waitStatus(op, ledger.StatusSucceeded, 15*time.Second)
	if f.orders(op) != 1 {
		t.Errorf("orders = %d, want 1", f.orders(op))
	}
}
