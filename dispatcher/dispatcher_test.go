package dispatcher_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actledger/actledger/dispatcher"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testoutbox"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

const settle = 15 * time.Second

func TestLostResponseWithKeysHonouredCreatesOneOrder(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: -1, Mode: mocksupplier.Honour})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1","qty":3}`)
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	if got := p.Orders(op); got != 1 {
		t.Errorf("supplier orders = %d, want 1", got)
	}
	if done.ProviderReference == nil || !strings.HasPrefix(*done.ProviderReference, "ord_") || done.Attempts != 2 {
		t.Errorf("succeeded with reference %v after %d attempts, want ord_… after 2", done.ProviderReference, done.Attempts)
	}
}

func TestLostResponseWithKeysIgnoredIsSettledByLookupAfterTheLag(t *testing.T) {
	t.Parallel()
	const lag = 700 * time.Millisecond
	p := testpipeline.New(t, testpipeline.Options{LookupLag: lag, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1","qty":3}`)
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	if got := p.Orders(op); got != 1 {
		t.Errorf("supplier orders = %d, want 1", got)
	}
	if got := p.Creates(op); got != 1 {
		t.Errorf("create requests = %d, want 1 (none after the lost response)", got)
	}
	if done.Attempts != 1 || done.ProviderReference == nil {
		t.Errorf("attempts %d reference %v", done.Attempts, done.ProviderReference)
	}
	if kinds := strings.Join(p.Kinds(op), ","); !strings.Contains(kinds, "lookup_found") {
		t.Errorf("events %s: want a lookup_found", kinds)
	}
}

func TestLostResponseWithoutKeyOrLookupGoesToReview(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusReview, settle)
	if got := p.Orders(op); got != 1 {
		t.Errorf("supplier orders = %d, want 1", got)
	}
	if *done.ReviewReason != ledger.ReasonOutcomeUnknown || *done.ReviewOwner != "supply-ops" || done.ReviewDeadline == nil {
		t.Errorf("review %v %v %v", *done.ReviewReason, *done.ReviewOwner, done.ReviewDeadline)
	}
	if kinds := strings.Join(p.Kinds(op), ","); kinds != "created,claimed,attempt,needs_review" {
		t.Errorf("events = %s", kinds)
	}
	p.Settled(settle)
	if got := p.Creates(op); got != 1 {
		t.Errorf("create requests = %d, want 1", got)
	}
}

func TestWorkerKilledAfterTheCallIsSettledByLookupNotASecondCreate(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: 300 * time.Millisecond, Mode: mocksupplier.Ignore, Lease: 1500 * time.Millisecond})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	var killed atomic.Bool
	ds := p.Start(1)
	ds[0].SetCrashAfterCall(func(ledger.Operation) bool { return !killed.Swap(true) })
	done := p.WaitStatus(op, ledger.StatusSucceeded, 20*time.Second)
	if got, creates := p.Orders(op), p.Creates(op); got != 1 || creates != 1 {
		t.Errorf("orders %d, create requests %d; want 1 and 1", got, creates)
	}
	kinds := strings.Join(p.Kinds(op), ",")
	if !strings.Contains(kinds, "lease_expired") || !strings.Contains(kinds, "lookup_found") {
		t.Errorf("events %s: want lease_expired then lookup_found", kinds)
	}
	if done.ProviderReference == nil {
		t.Error("no provider reference recorded")
	}
}

func TestDuplicatedMessagesAndRacingWorkersMakeOneCall(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.Delay, MS: 200})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	// Two more copies of the dispatch message, past JetStream's dedup.
	for i := range 2 {
		m := ledger.DispatchMessage{Subject: p.Broker.DispatchSubject("acme"), OperationID: op.ID, Version: op.Version, RepublishedAt: time.Now().Add(time.Duration(i))}.Outbox()
		if err := testoutbox.InsertErr(context.Background(), p.Pool, m); err != nil {
			t.Fatal(err)
		}
	}
	p.Start(4)
	p.WaitStatus(op, ledger.StatusSucceeded, settle)
	p.Settled(settle) // let every copy be handled
	if got, creates := p.Orders(op), p.Creates(op); got != 1 || creates != 1 {
		t.Errorf("orders %d, create requests %d; want 1 and 1", got, creates)
	}
}

func TestTwoUnavailableAnswersThenCreatedSucceedsAfterThreeAttempts(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour})
	p.Supplier.SetFaults("",
		mocksupplier.Fault{Kind: mocksupplier.UnavailableBeforeCommit, RetryAfterS: 1},
		mocksupplier.Fault{Kind: mocksupplier.UnavailableBeforeCommit, RetryAfterS: 1})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusSucceeded, 20*time.Second)
	if done.Attempts != 3 || p.Orders(op) != 1 {
		t.Errorf("attempts %d orders %d; want 3 and 1", done.Attempts, p.Orders(op))
	}
	if kinds := strings.Join(p.Kinds(op), ","); kinds != "created,claimed,attempt,claimed,attempt,claimed,attempt" {
		t.Errorf("events = %s", kinds)
	}
}

func TestRetriesExhaustedGoToReview(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour, MaxAttempts: 2})
	p.Supplier.SetFaults("",
		mocksupplier.Fault{Kind: mocksupplier.RateLimit429}, mocksupplier.Fault{Kind: mocksupplier.RateLimit429},
		mocksupplier.Fault{Kind: mocksupplier.RateLimit429})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusReview, 20*time.Second)
	if *done.ReviewReason != ledger.ReasonRetriesExhausted || done.Attempts != 2 || p.Orders(op) != 0 {
		t.Errorf("reason %s attempts %d orders %d", *done.ReviewReason, done.Attempts, p.Orders(op))
	}
}

func TestRetryAfterBeyondMaxElapsedGoesToReviewWithoutWaiting(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour, MaxElapsed: 2 * time.Second})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.RateLimit429, RetryAfterS: 30})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	// The supplier asks for 30 s; the budget ends after 2 s: no retry is
	// scheduled that could only be sent after it.
	done := p.WaitStatus(op, ledger.StatusReview, 5*time.Second)
	if *done.ReviewReason != ledger.ReasonRetriesExhausted || done.Attempts != 1 || p.Creates(op) != 1 {
		t.Errorf("reason %s attempts %d create requests %d; want retries_exhausted after 1", *done.ReviewReason, done.Attempts, p.Creates(op))
	}
}

func TestRejectedOperationFailsWithNoOrder(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.Reject422})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusFailed, settle)
	if p.Orders(op) != 0 || done.Attempts != 1 {
		t.Errorf("orders %d attempts %d; want 0 and 1", p.Orders(op), done.Attempts)
	}
}

func TestApprovalExpiredBeforeDispatchIsHeldWithNoOrder(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Clock.Advance(2 * time.Hour) // the approval lapses while the job waits
	p.Start(1)
	p.WaitStatus(op, ledger.StatusHeld, settle)
	if got := p.Creates(op); got != 0 {
		t.Errorf("create requests = %d, want 0", got)
	}
	if kinds := strings.Join(p.Kinds(op), ","); kinds != "created,claimed,approval_expired" {
		t.Errorf("events = %s", kinds)
	}
}

func TestApprovalRevokedBeforeDispatchIsHeldWithNoOrder(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	if status, out := p.Do("POST", "/v1/approvals/"+op.ApprovalID.String()+"/revoke", p.Approver, ""); status != http.StatusOK {
		t.Fatalf("revoke: %d %v", status, out)
	}
	p.Start(1)
	p.WaitStatus(op, ledger.StatusHeld, 5*time.Second)
	p.Settled(settle) // the dispatch message arrives and is ignored
	if got := p.Creates(op); got != 0 {
		t.Errorf("create requests = %d, want 0", got)
	}
}

func TestRevokedTokenBeforeDispatchIsHeldWithNoOrder(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	// Revoke the token behind the ledger's back, as a token revoked
	// between the claim and the call would look to the worker.
	if _, err := p.Pool.Exec(context.Background(), `UPDATE api_tokens SET revoked_at = now() WHERE id = $1`, op.RequestedBy); err != nil {
		t.Fatal(err)
	}
	p.Start(1)
	p.WaitStatus(op, ledger.StatusHeld, settle)
	if got := p.Creates(op); got != 0 {
		t.Errorf("create requests = %d, want 0", got)
	}
}

func TestTwoApprovedOperationsWithIdenticalParamsMakeTwoOrders(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour})
	a := p.Enqueue("po-1", `{"sku":"A-1","qty":3}`)
	b := p.Enqueue("po-2", `{"sku":"A-1","qty":3}`)
	p.Start(1)
	p.WaitStatus(a, ledger.StatusSucceeded, settle)
	p.WaitStatus(b, ledger.StatusSucceeded, settle)
	if p.Orders(a) != 1 || p.Orders(b) != 1 || p.Supplier.TotalOrders() != 2 {
		t.Errorf("orders %d + %d, total %d; want 1 + 1 = 2", p.Orders(a), p.Orders(b), p.Supplier.TotalOrders())
	}
}

func TestRestartDuringRetryWaitStillRetriesOnce(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.UnavailableBeforeCommit, RetryAfterS: 2})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	waiting := p.WaitStatus(op, ledger.StatusRetryWait, settle)
	p.StopAll() // the whole process goes away during the backoff
	if !waiting.NextAttemptAt.After(time.Now()) {
		t.Fatalf("retry due at %s is not in the future", waiting.NextAttemptAt)
	}
	p.Start(1) // a new process, with nothing in memory
	done := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	creates := p.Supplier.CreateRequests(op.ExternalKey)
	if len(creates) != 2 || p.Orders(op) != 1 || done.Attempts != 2 {
		t.Fatalf("create requests %d, orders %d, attempts %d; want 2, 1, 2", len(creates), p.Orders(op), done.Attempts)
	}
	if gap := creates[1].Sub(creates[0]); gap < 2*time.Second {
		t.Errorf("retry came %s after the 503, before its Retry-After of 2s", gap)
	}
}

func TestPausedWorkStaysQueuedUntilResume(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour})
	if status, out := p.Do("POST", "/v1/dispatch/pause", p.Operator, `{"provider":"acme"}`); status != http.StatusOK {
		t.Fatalf("pause: %d %v", status, out)
	}
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.Settled(settle)
	if got := p.Get(op); got.Status != ledger.StatusQueued || p.Creates(op) != 0 {
		t.Fatalf("paused: status %s, create requests %d; want queued and 0", got.Status, p.Creates(op))
	}
	if status, out := p.Do("POST", "/v1/dispatch/resume", p.Operator, `{"provider":"acme"}`); status != http.StatusOK || out["released"] != float64(1) {
		t.Fatalf("resume: %d %v", status, out)
	}
	p.WaitStatus(op, ledger.StatusSucceeded, settle)
	if p.Orders(op) != 1 {
		t.Errorf("orders = %d, want 1", p.Orders(op))
	}
}

func TestSlowProviderDoesNotHoldUpAnother(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour})
	// acme takes 800ms per order; beta answers at once.
	slow := make([]mocksupplier.Fault, 12)
	for i := range slow {
		slow[i] = mocksupplier.Fault{Kind: mocksupplier.Delay, MS: 800}
	}
	p.Supplier.SetFaults("", slow...)
	var acme []ledger.Operation
	for i := range 12 {
		acme = append(acme, p.Enqueue(fmt.Sprintf("po-%d", i), fmt.Sprintf(`{"sku":"A-%d"}`, i)))
	}
	ticket := p.EnqueueAction(testpipeline.OtherAction, "t-1", `{"subject":"help"}`)
	p.Start(1) // 4 workers per provider
	p.WaitStatus(ticket, ledger.StatusSucceeded, settle)
	// Had beta waited behind acme's backlog, all of acme would be done.
	done := 0
	for _, op := range acme {
		if p.Get(op).Status == ledger.StatusSucceeded {
			done++
		}
	}
	if done == len(acme) {
		t.Errorf("beta's operation finished only after all %d of acme's", done)
	}
	if got := p.Other.Orders(ticket.ExternalKey); got != 1 {
		t.Errorf("beta orders = %d, want 1", got)
	}
	for _, op := range acme {
		p.WaitStatus(op, ledger.StatusSucceeded, settle)
	}
}

// lookupsDown is a provider whose lookups always fail.
type lookupsDown struct{ provider.Provider }

func (lookupsDown) Lookup(context.Context, provider.LookupRequest) provider.LookupResult {
	return provider.LookupResult{Status: provider.LookupError, HTTPStatus: 503, Error: "lookup API down", At: time.Now()}
}

func TestLostResponseIsResentUnderTheKeyBeforeAnyLookup(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{
		Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour,
		Providers: func(real provider.Provider) provider.Provider { return lookupsDown{real} },
	})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusSucceeded, settle)
	if p.Orders(op) != 1 || p.Creates(op) != 2 {
		t.Errorf("orders %d, create requests %d; want 1 and 2 (the resend answered with the stored order)", p.Orders(op), p.Creates(op))
	}
	if kinds := strings.Join(p.Kinds(op), ","); strings.Contains(kinds, "lookup") {
		t.Errorf("events %s: the idempotency contract settles it, no lookup is needed", kinds)
	}
}

func TestLookupIsNotTrustedInAnotherAccountThanTheSend(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: 3 * time.Second, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusUnknown, settle)
	// Before the lookup is due, the history shows a send to another account
	// (the provider's config changed since).
	err := p.Store.AppendEvent(context.Background(), op.ID, "attempt", "worker:old",
		map[string]any{"attempt": 0, "class": "unknown", "sent": true, "account": "acct_before", "environment": "test"})
	if err != nil {
		t.Fatal(err)
	}
	done := p.WaitStatus(op, ledger.StatusReview, settle)
	if *done.ReviewReason != ledger.ReasonLookupUntrusted {
		t.Errorf("review reason %s, want %s", *done.ReviewReason, ledger.ReasonLookupUntrusted)
	}
	if kinds := strings.Join(p.Kinds(op), ","); strings.Contains(kinds, "lookup_found") || p.Creates(op) != 1 {
		t.Errorf("events %s, create requests %d: want no lookup trusted and no resend", kinds, p.Creates(op))
	}
}

func TestSuccessSeenByAFencedWorkerSettlesTheOperation(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore, Lease: 1500 * time.Millisecond})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	ds := p.Start(1)
	var stalled atomic.Bool
	ds[0].SetStallAfterCall(func(ledger.Operation) {
		if stalled.Swap(true) {
			return
		}
		// The lease runs out while the answer waits: the sweeper finds the
		// outcome unknown and, with no lookup and no idempotency, hands it
		// to a person.
		p.WaitStatus(op, ledger.StatusReview, settle)
	})
	done := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	if p.Orders(op) != 1 || p.Creates(op) != 1 {
		t.Errorf("orders %d, create requests %d; want 1 and 1", p.Orders(op), p.Creates(op))
	}
	kinds := strings.Join(p.Kinds(op), ",")
	if !strings.Contains(kinds, "lease_expired") || !strings.Contains(kinds, "stale_result") || !strings.HasSuffix(kinds, "evidence") {
		t.Errorf("events %s: want lease_expired, the fenced worker's stale_result, then the evidence that settled it", kinds)
	}
	if done.ProviderReference == nil || !strings.HasPrefix(*done.ProviderReference, "ord_") {
		t.Errorf("provider reference %v", done.ProviderReference)
	}
}

// gatedCalls holds every create at a gate and counts the calls in flight.
type gatedCalls struct {
	provider.Provider
	gate              chan struct{}
	inFlight, highest atomic.Int32
}

func (g *gatedCalls) Create(ctx context.Context, req provider.CreateRequest) provider.Result {
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for {
		h := g.highest.Load()
		if n <= h || g.highest.CompareAndSwap(h, n) {
			break
		}
	}
	<-g.gate
	return g.Provider.Create(ctx, req)
}

// While every call slot is taken by a call that has not returned, the
// workers go on claiming the next operations, up to ClaimsAhead per slot
// (their claims' commits do not wait for a slot), and the provider still
// never sees more calls at once than the dispatcher's Concurrency.
func TestClaimsGoAheadWhileEveryCallSlotIsBusy(t *testing.T) {
	t.Parallel()
	calls := &gatedCalls{gate: make(chan struct{})}
	p := testpipeline.New(t, testpipeline.Options{
		Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour, Lease: 5 * time.Second, Timeout: 2 * time.Second,
		Providers: func(real provider.Provider) provider.Provider { calls.Provider = real; return calls },
	})
	p.Start(1) // 4 call slots per provider
	var open sync.Once
	release := func() { open.Do(func() { close(calls.gate) }) }
	t.Cleanup(release) // before the pipeline's own cleanups, which wait for the calls
	var ops []ledger.Operation
	for i := range 12 {
		ops = append(ops, p.Enqueue(fmt.Sprintf("po-%d", i), fmt.Sprintf(`{"sku":"A-%d"}`, i)))
	}
	dispatching := func() int {
		var n int
		if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM operations WHERE status = 'dispatching'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ahead := 4 * dispatcher.ClaimsAhead // 4 calls, and as many claimed as the workers take ahead of them
	p.Eventually(5*time.Second, "4 calls held and more operations claimed", func() bool {
		return calls.inFlight.Load() == 4 && dispatching() == ahead
	})
	release()
	for _, op := range ops {
		p.WaitStatus(op, ledger.StatusSucceeded, settle)
		if p.Orders(op) != 1 || p.Creates(op) != 1 {
			t.Errorf("%s: orders %d, create requests %d; want 1 and 1", op.Key, p.Orders(op), p.Creates(op))
		}
	}
	if h := calls.highest.Load(); h != 4 {
		t.Errorf("at most %d calls at once, want 4 (the dispatcher's Concurrency)", h)
	}
}

// An answer waiting to be recorded holds no room in the worker pool: with
// every answer held before it is recorded, all 12 operations are still
// claimed and called. Had a message kept its room until its answer was
// recorded, only 4 slots × ClaimsAhead calls would happen.
func TestAnswersWaitingToBeRecordedDoNotHoldBackTheNextClaims(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour})
	ds := p.Start(1) // 4 call slots per provider
	var called atomic.Int32
	recordNow := make(chan struct{})
	var open sync.Once
	release := func() { open.Do(func() { close(recordNow) }) }
	t.Cleanup(release) // before the pipeline's own cleanups, which wait for the workers
	ds[0].SetStallAfterCall(func(ledger.Operation) {
		called.Add(1)
		<-recordNow
	})
	const n = 12
	if room := 4 * dispatcher.ClaimsAhead; room >= n {
		t.Fatalf("the test needs more operations than the pool's room (%d)", room)
	}
	var ops []ledger.Operation
	for i := range n {
		ops = append(ops, p.Enqueue(fmt.Sprintf("po-%d", i), fmt.Sprintf(`{"sku":"A-%d"}`, i)))
	}
	p.Eventually(5*time.Second, "every operation called while no answer is recorded", func() bool { return called.Load() == n })
	release()
	for _, op := range ops {
		p.WaitStatus(op, ledger.StatusSucceeded, settle)
		if p.Orders(op) != 1 || p.Creates(op) != 1 {
			t.Errorf("%s: orders %d, create requests %d; want 1 and 1", op.Key, p.Orders(op), p.Creates(op))
		}
	}
}

// A worker's slot is free as soon as its provider call returns: with every
// answer of the first calls held before it is recorded, the next
// operations are still claimed and called. Had a slot stayed taken until
// its answer was recorded, only the 4 workers' first calls would happen.
func TestWorkerSlotIsFreeWhileItsAnswerIsRecorded(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour})
	ds := p.Start(1) // 4 workers per provider
	var called atomic.Int32
	recordNow := make(chan struct{})
	ds[0].SetStallAfterCall(func(ledger.Operation) {
		if called.Add(1) <= 8 {
			select {
			case <-recordNow:
			case <-time.After(settle):
			}
		}
	})
	var ops []ledger.Operation
	for i := range 12 {
		ops = append(ops, p.Enqueue(fmt.Sprintf("po-%d", i), fmt.Sprintf(`{"sku":"A-%d"}`, i)))
	}
	p.Eventually(5*time.Second, "8 calls made while the first answers wait to be recorded", func() bool { return called.Load() >= 8 })
	close(recordNow)
	for _, op := range ops {
		p.WaitStatus(op, ledger.StatusSucceeded, settle)
		if p.Orders(op) != 1 || p.Creates(op) != 1 {
			t.Errorf("%s: orders %d, create requests %d; want 1 and 1", op.Key, p.Orders(op), p.Creates(op))
		}
	}
}
