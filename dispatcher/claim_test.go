package dispatcher_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actledger/actledger/dispatcher"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// Lease and provider timeouts of the claim tests: long enough that the
// timings below hold on a loaded machine, with a lease shorter than a
// lookup plus a create.
const (
	claimTimeout = 3 * time.Second
	claimLease   = 4 * time.Second
)

// A first create stalls until the client gives up (nothing was created);
// the lookup that follows takes most of a lease, and the create after it
// commits at the supplier just inside the provider's timeout but after the
// lease the worker had when it started the lookup. A second worker must
// not create another order meanwhile.
func TestCallOutlivingTheLeaseAfterASlowLookupMakesOneOrder(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: 0, Mode: mocksupplier.Ignore, Lease: claimLease, Timeout: claimTimeout})
	p.Supplier.SetFaults("",
		mocksupplier.Fault{Kind: mocksupplier.StallBeforeCommit, MS: 10_000},
		mocksupplier.Fault{Kind: mocksupplier.CommitLate, MS: int((claimTimeout - 200*time.Millisecond).Milliseconds())})
	p.Supplier.SetLookupDelay(claimTimeout - 200*time.Millisecond)
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(2)
	p.WaitStatus(op, ledger.StatusSucceeded, 30*time.Second)
	p.StopAll() // every claim's calls end and are recorded
	if got, creates := p.Orders(op), p.Creates(op); got != 1 || creates != 2 {
		t.Errorf("orders %d, create requests %d; want 1 and 2 (the stalled one and one that committed); history:\n%s", got, creates, p.History(op))
	}
}

// The worker gets its claim late (a slow shared commit, a paused process):
// most of the lease is gone before it starts the create, which commits just
// inside the provider's timeout but after that lease.
func TestDelayBeforeTheClaimReturnsStillMakesOneOrder(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: 0, Mode: mocksupplier.Ignore, Lease: claimLease, Timeout: claimTimeout})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.CommitLate, MS: int((claimTimeout - 200*time.Millisecond).Milliseconds())})
	var delayed atomic.Bool
	ds := p.Start(2)
	for _, d := range ds {
		d.SetAfterClaim(func(ledger.Operation) {
			if !delayed.Swap(true) {
				// Less than the lease, but it leaves much less than the
				// provider's timeout of it.
				time.Sleep(claimLease - 1100*time.Millisecond)
			}
		})
	}
	op := p.Enqueue("po-1", `{"sku":"A-1"}`) // after the hooks are set
	p.WaitStatus(op, ledger.StatusSucceeded, 30*time.Second)
	p.StopAll()
	if !delayed.Load() {
		t.Fatal("no claim was delayed")
	}
	if got := p.Orders(op); got != 1 {
		t.Errorf("orders %d, want 1; history:\n%s", got, p.History(op))
	}
}

// A worker whose claim was taken over (its lease expired and another worker
// settled the operation) resumes afterwards: it must not call the provider.
func TestSupersededWorkerNeverCallsTheProvider(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: 0, Mode: mocksupplier.Ignore})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	stale, err := dispatcher.New(p.Store, p.Broker, dispatcher.Config{Registry: p.Registry, LeaseDuration: p.Opts.Lease, WorkerID: "stale", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	claimed, resume := make(chan struct{}), make(chan struct{})
	stale.SetAfterClaim(func(ledger.Operation) {
		close(claimed)
		<-resume
	})
	done := make(chan error, 1)
	go func() {
		done <- stale.Execute(context.Background(), "acme", ledger.Dispatch{OperationID: op.ID, Version: op.Version})
	}()
	<-claimed
	p.Start(1) // the sweeper expires the stale claim; another worker looks up and creates
	p.WaitStatus(op, ledger.StatusSucceeded, settle)
	close(resume)
	if err := <-done; err != nil {
		t.Errorf("superseded worker: %v", err)
	}
	if got, creates := p.Orders(op), p.Creates(op); got != 1 || creates != 1 {
		t.Errorf("orders %d, create requests %d; want 1 and 1 (none from the superseded worker); history:\n%s", got, creates, p.History(op))
	}
}

// The first create's answer is lost after the order was committed; the
// resend with the same key is refused before the key is looked at
// (rotated credentials). The refusal says nothing about the first order:
// the operation goes to a person, never to failed ("nothing happened").
func TestRefusedResendAfterAnUnknownOutcomeGoesToReviewNotFailed(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: -1, Mode: mocksupplier.Honour})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit}, mocksupplier.Fault{Kind: mocksupplier.Unauthorized401})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusReview, settle)
	if *done.ReviewReason != ledger.ReasonRejectedAfterUnknown {
		t.Errorf("review reason %s, want %s; history:\n%s", *done.ReviewReason, ledger.ReasonRejectedAfterUnknown, p.History(op))
	}
	if p.Orders(op) != 1 || p.Creates(op) != 2 {
		t.Errorf("orders %d, create requests %d; want 1 and 2", p.Orders(op), p.Creates(op))
	}
	status, out := p.Do("GET", "/v1/operations/"+op.ID.String(), p.Agent, "")
	if summary, _ := out["summary"].(string); status != http.StatusOK || strings.Contains(summary, "nothing happened") || !strings.Contains(summary, "do not repeat") {
		t.Errorf("agent told %d %q: must not say nothing happened, must say not to repeat it", status, summary)
	}
	events, err := p.Store.Events(context.Background(), ledger.WholeTenant(p.TenantID), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1]
	if last.Kind != "attempt" || !strings.Contains(string(last.Detail), `"http_status": 401`) || !strings.Contains(string(last.Detail), "earlier attempt") {
		t.Errorf("last event %s %s: want the refused attempt with its facts", last.Kind, last.Detail)
	}
}

// The first create stalls and has no effect; while the slow lookup that
// follows runs, the approval is revoked. The lookup finds nothing, and the
// resend must not happen: the revoked approval no longer covers it.
func TestRevokeDuringALookupStopsTheResend(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: 0, Mode: mocksupplier.Ignore, Lease: claimLease, Timeout: claimTimeout})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.StallBeforeCommit, MS: 10_000})
	p.Supplier.SetLookupDelay(2 * time.Second)
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.Eventually(settle, "the lookup to start", func() bool { return len(p.Supplier.LookupRequests(op.ExternalKey)) > 0 })
	if status, out := p.Do("POST", "/v1/approvals/"+op.ApprovalID.String()+"/revoke", p.Approver, ""); status != http.StatusOK {
		t.Fatalf("revoke: %d %v", status, out)
	}
	done := p.WaitStatus(op, ledger.StatusReview, settle)
	p.StopAll()
	if *done.ReviewReason != ledger.ReasonLapsedUnknown {
		t.Errorf("review reason %s, want %s", *done.ReviewReason, ledger.ReasonLapsedUnknown)
	}
	if p.Orders(op) != 0 || p.Creates(op) != 1 {
		t.Errorf("orders %d, create requests %d; want 0 and 1 (no resend); history:\n%s", p.Orders(op), p.Creates(op), p.History(op))
	}
}

// An attempt without a definite answer may still be worked on at the
// provider until the call's full timeout has passed, however early the
// client saw the connection drop.
func TestUnknownAttemptCountsTheCallDeadlineAsTheLastSend(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit}) // EOF at once
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	got := p.WaitStatus(op, ledger.StatusReview, settle)
	if got.FirstSentAt == nil || got.LastSentAt == nil || got.LastSentAt.Sub(*got.FirstSentAt) < p.Opts.Timeout {
		t.Errorf("first send %v, last send %v: want the last send at least the timeout %s after the first", got.FirstSentAt, got.LastSentAt, p.Opts.Timeout)
	}
}

// A lease that cannot hold a call's full timeout plus the margin could
// never make a call safely: the dispatcher refuses to start with it.
func TestLeaseTooShortForATimeoutAndItsMarginIsRefused(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: 0, Mode: mocksupplier.Ignore})
	_, err := dispatcher.New(p.Store, p.Broker, dispatcher.Config{Registry: p.Registry, LeaseDuration: p.Opts.Timeout + 50*time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "plus the call margin") {
		t.Errorf("New = %v, want an error naming the timeout, the margin and the lease", err)
	}
	if _, err := dispatcher.New(p.Store, p.Broker, dispatcher.Config{Registry: p.Registry, LeaseDuration: 2 * p.Opts.Timeout}); err != nil {
		t.Errorf("New with room for a call: %v", err)
	}
}
