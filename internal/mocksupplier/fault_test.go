package mocksupplier_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/mocksupplier/internal/faketest"
	"github.com/actledger/actledger/internal/testpoll"
)

func TestDropAfterCommitLosesResponseButKeepsOrder(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	f.sup.SetFaults("po-1", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})

	_, err := f.do(f.client, http.MethodPost, "/v1/orders", "key-1", `{"client_reference":"po-1"}`)

	if err == nil {
		t.Fatal("client got an answer, want a transport error (the response is lost)")
	}
	if got := f.sup.Orders("po-1"); got != 1 {
		t.Errorf("Orders(po-1) = %d, want 1 (the order was committed)", got)
	}
}

func TestRetryWithSameKeyAfterDropReplaysTheCommittedOrder(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	f.sup.SetFaults("po-1", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	if _, err := f.do(f.client, http.MethodPost, "/v1/orders", "key-1", `{"client_reference":"po-1"}`); err == nil {
		t.Fatal("first request got an answer, want it lost")
	}

	r := f.create(t, "key-1", `{"client_reference":"po-1"}`)

	if r.Status != http.StatusCreated || !r.replayed() {
		t.Fatalf("retry: status %d replayed %v, want a replayed 201", r.Status, r.replayed())
	}
	found := f.lookup(t, "po-1")
	if len(found) != 1 || found[0].ID != r.order(t).ID {
		t.Errorf("lookup = %v, want exactly the replayed order", found)
	}
	if got := f.sup.Orders("po-1"); got != 1 {
		t.Errorf("Orders(po-1) = %d, want 1", got)
	}
}

func TestNaiveRetryAfterDropDuplicatesTheOrderInIgnoreMode(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{Idempotency: mocksupplier.Ignore})
	f.sup.SetFaults("po-1", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	if _, err := f.do(f.client, http.MethodPost, "/v1/orders", "key-1", `{"client_reference":"po-1"}`); err == nil {
		t.Fatal("first request got an answer, want it lost")
	}

	f.create(t, "key-1", `{"client_reference":"po-1"}`)

	if got := f.sup.Orders("po-1"); got != 2 {
		t.Errorf("Orders(po-1) = %d, want 2: the story the demo tells", got)
	}
}

// Go's http.Transport re-sends a POST carrying an Idempotency-Key when a reused connection dies
// before the response: the client sees one clean 201 although the supplier received two
// requests. The mock makes that visible through CreateRequests.
func TestTransportResendsIdempotentPOSTAfterDropOnReusedConnection(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	keepAlive := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(keepAlive.CloseIdleConnections)
	if _, err := f.do(keepAlive, http.MethodGet, "/healthz", "", ""); err != nil {
		t.Fatalf("warming the connection: %v", err)
	}
	f.sup.SetFaults("po-1", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})

	r, err := f.do(keepAlive, http.MethodPost, "/v1/orders", "key-1", `{"client_reference":"po-1"}`)

	if err != nil {
		t.Fatalf("client saw %v, want the transport's silent re-send to answer", err)
	}
	if r.Status != http.StatusCreated || !r.replayed() {
		t.Errorf("status %d replayed %v, want the stored 201 replayed", r.Status, r.replayed())
	}
	if got := len(f.sup.CreateRequests("po-1")); got != 2 {
		t.Errorf("CreateRequests(po-1) = %d, want 2 (one by the caller, one by the transport)", got)
	}
	if got := f.sup.Orders("po-1"); got != 1 {
		t.Errorf("Orders(po-1) = %d, want 1", got)
	}
}

func TestError500AfterCommitKeepsOrder(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	f.sup.SetFaults("po-1", mocksupplier.Fault{Kind: mocksupplier.Error500AfterCommit})

	r := f.create(t, "key-1", `{"client_reference":"po-1"}`)

	if r.Status != http.StatusInternalServerError {
		t.Fatalf("status = %d, want 500", r.Status)
	}
	if got := f.sup.Orders("po-1"); got != 1 {
		t.Errorf("Orders(po-1) = %d, want 1 (committed before the 500)", got)
	}
	// Like Stripe, the stored answer is the 500: only a lookup reveals the order.
	again := f.create(t, "key-1", `{"client_reference":"po-1"}`)
	if again.Status != http.StatusInternalServerError || !again.replayed() {
		t.Errorf("retry: status %d replayed %v, want the stored 500 replayed", again.Status, again.replayed())
	}
	if got := len(f.lookup(t, "po-1")); got != 1 {
		t.Errorf("lookup found %d orders, want 1", got)
	}
}

func TestRefusalsBeforeCommitCreateNothingAndReleaseTheKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		fault          mocksupplier.Fault
		wantStatus     int
		wantRetryAfter string
	}{
		{"503 default Retry-After", mocksupplier.Fault{Kind: mocksupplier.UnavailableBeforeCommit}, http.StatusServiceUnavailable, "1"},
		{"503 explicit Retry-After", mocksupplier.Fault{Kind: mocksupplier.UnavailableBeforeCommit, RetryAfterS: 7}, http.StatusServiceUnavailable, "7"},
		{"429", mocksupplier.Fault{Kind: mocksupplier.RateLimit429, RetryAfterS: 2}, http.StatusTooManyRequests, "2"},
		{"422", mocksupplier.Fault{Kind: mocksupplier.Reject422}, http.StatusUnprocessableEntity, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, mocksupplier.Config{})
			f.sup.SetFaults("po-1", tt.fault)

			r := f.create(t, "key-1", `{"client_reference":"po-1"}`)

			if r.Status != tt.wantStatus {
				t.Errorf("status = %d, want %d", r.Status, tt.wantStatus)
			}
			if got := r.Header.Get("Retry-After"); got != tt.wantRetryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.wantRetryAfter)
			}
			if got := f.sup.Orders("po-1"); got != 0 {
				t.Errorf("Orders(po-1) = %d, want 0", got)
			}
			again := f.create(t, "key-1", `{"client_reference":"po-1"}`)
			if again.Status != http.StatusCreated || again.replayed() {
				t.Errorf("retry with the same key: status %d replayed %v, want a fresh 201", again.Status, again.replayed())
			}
		})
	}
}

func TestFaultQueueIsConsumedInOrderPerReference(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	unavailable := mocksupplier.Fault{Kind: mocksupplier.UnavailableBeforeCommit}
	f.sup.SetFaults("po-1", unavailable, unavailable)

	var got []int
	for range 3 {
		got = append(got, f.create(t, "key-1", `{"client_reference":"po-1"}`).Status)
	}

	want := []int{503, 503, 201}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("statuses = %v, want %v", got, want)
		}
	}
	if n := f.sup.Orders("po-1"); n != 1 {
		t.Errorf("Orders(po-1) = %d, want 1", n)
	}
	if r := f.create(t, "key-2", `{"client_reference":"po-2"}`); r.Status != http.StatusCreated {
		t.Errorf("another reference: status %d, want 201 (faults of po-1 are not its)", r.Status)
	}
}

func TestWholeRunFaultsApplyWhenReferenceHasNone(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	f.sup.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.Reject422})
	f.sup.SetFaults("po-own", mocksupplier.Fault{Kind: mocksupplier.UnavailableBeforeCommit})

	steps := []struct{ reference, key string }{
		{"po-own", "k1"},   // its own queue wins
		{"po-other", "k2"}, // takes the whole-run fault
		{"po-other", "k3"}, // queues are empty
		{"po-own", "k4"},
	}
	want := []int{503, 422, 201, 201}
	for i, s := range steps {
		r := f.create(t, s.key, `{"client_reference":"`+s.reference+`"}`)
		if r.Status != want[i] {
			t.Errorf("step %d (%s): status %d, want %d", i, s.reference, r.Status, want[i])
		}
	}
}

func TestReplaysConsumeNoFault(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	f.create(t, "key-1", `{"client_reference":"po-1"}`)
	f.sup.SetFaults("po-1", mocksupplier.Fault{Kind: mocksupplier.Reject422})

	replay := f.create(t, "key-1", `{"client_reference":"po-1"}`)
	fresh := f.create(t, "key-2", `{"client_reference":"po-1"}`)

	if replay.Status != http.StatusCreated || !replay.replayed() {
		t.Errorf("replay: status %d replayed %v, want a replayed 201", replay.Status, replay.replayed())
	}
	if fresh.Status != http.StatusUnprocessableEntity {
		t.Errorf("next new request: status %d, want the queued 422", fresh.Status)
	}
}

func TestDelayAnswersAfterWaiting(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	f.sup.SetFaults("po-1", mocksupplier.Fault{Kind: mocksupplier.Delay, MS: 150})

	start := time.Now()
	r := f.create(t, "key-1", `{"client_reference":"po-1"}`)

	if r.Status != http.StatusCreated {
		t.Errorf("status = %d, want 201", r.Status)
	}
	if elapsed := time.Since(start); elapsed < 150*time.Millisecond {
		t.Errorf("answered after %v, want at least 150ms", elapsed)
	}
}

func TestClientTimeoutDuringDelayLeavesTheOrderCommitted(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	f.sup.SetFaults("po-1", mocksupplier.Fault{Kind: mocksupplier.Delay, MS: 10_000})
	impatient := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 100 * time.Millisecond}

	_, err := f.do(impatient, http.MethodPost, "/v1/orders", "key-1", `{"client_reference":"po-1"}`)

	if err == nil {
		t.Fatal("client got an answer, want its timeout")
	}
	if got := f.sup.Orders("po-1"); got != 1 {
		t.Errorf("Orders(po-1) = %d, want 1 (committed before the delay)", got)
	}
	// Once the server notices the client left, the key holds the 201 (409 until then).
	faketest.WaitFor(t, 5*time.Second, func() bool {
		r := f.create(t, "key-1", `{"client_reference":"po-1"}`)
		if r.Status != http.StatusConflict && !(r.Status == http.StatusCreated && r.replayed()) {
			t.Fatalf("retry: status %d %s, want 409 or a replayed 201", r.Status, r.Body)
		}
		return r.Status == http.StatusCreated
	})
	if got := f.sup.Orders("po-1"); got != 1 {
		t.Errorf("Orders(po-1) = %d after retries, want 1", got)
	}
}

func TestSetFaultsPanicsOnUnknownKind(t *testing.T) {
	t.Parallel()
	sup := mocksupplier.New(mocksupplier.Config{})
	defer func() {
		if recover() == nil {
			t.Error("SetFaults accepted kind \"explode\"")
		}
	}()
	sup.SetFaults("po-1", mocksupplier.Fault{Kind: "explode"})
}

func TestCommitLateCreatesTheOrderAfterTheClientGaveUp(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	f.sup.SetFaults("po-1", mocksupplier.Fault{Kind: mocksupplier.CommitLate, MS: 300})
	impatient := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 50 * time.Millisecond}

	if _, err := f.do(impatient, http.MethodPost, "/v1/orders", "key-1", `{"client_reference":"po-1"}`); err == nil {
		t.Fatal("client got an answer, want its timeout")
	}
	if got := f.sup.Orders("po-1"); got != 0 {
		t.Fatalf("Orders(po-1) = %d right after the timeout, want 0 (not committed yet)", got)
	}
	testpoll.Until(t, 5*time.Second, func() error {
		if got := f.sup.Orders("po-1"); got != 1 {
			return fmt.Errorf("the late order never appeared: Orders(po-1) = %d, want 1", got)
		}
		return nil
	})
}

func TestStallBeforeCommitCreatesNothing(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	f.sup.SetFaults("po-1", mocksupplier.Fault{Kind: mocksupplier.StallBeforeCommit, MS: 50})

	r := f.create(t, "key-1", `{"client_reference":"po-1"}`)

	if r.Status != http.StatusServiceUnavailable || f.sup.Orders("po-1") != 0 {
		t.Errorf("status %d, orders %d; want 503 and 0", r.Status, f.sup.Orders("po-1"))
	}
	if again := f.create(t, "key-1", `{"client_reference":"po-1"}`); again.Status != http.StatusCreated || again.replayed() {
		t.Errorf("retry: status %d replayed %v, want a fresh 201 (the key was released)", again.Status, again.replayed())
	}
}

func TestUnauthorizedRefusesARepeatBeforeItsKeyIsLookedAt(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	f.sup.SetFaults("po-1", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit}, mocksupplier.Fault{Kind: mocksupplier.Unauthorized401})
	if _, err := f.do(f.client, http.MethodPost, "/v1/orders", "key-1", `{"client_reference":"po-1"}`); err == nil {
		t.Fatal("first request got an answer, want it lost")
	}

	r := f.create(t, "key-1", `{"client_reference":"po-1"}`)

	if r.Status != http.StatusUnauthorized || r.replayed() {
		t.Errorf("repeat: status %d replayed %v, want a plain 401", r.Status, r.replayed())
	}
	if got := f.sup.Orders("po-1"); got != 1 {
		t.Errorf("Orders(po-1) = %d, want 1: the refusal says nothing about the first order", got)
	}
}

func TestSlowLookupAnswersWithTheOrdersOfWhenItArrived(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	f.sup.SetLookupDelay(300 * time.Millisecond)
	type answer struct {
		r   reply
		err error
	}
	done := make(chan answer)
	go func() {
		r, err := f.do(f.client, http.MethodGet, "/v1/orders?client_reference=po-1", "", "")
		done <- answer{r, err}
	}()
	testpoll.Until(t, 5*time.Second, func() error {
		if len(f.sup.LookupRequests("po-1")) == 0 {
			return errors.New("lookup never arrived")
		}
		return nil
	})
	f.create(t, "key-1", `{"client_reference":"po-1"}`)

	a := <-done
	if a.err != nil || a.r.Status != http.StatusOK || strings.TrimSpace(string(a.r.Body)) != "[]" {
		t.Errorf("lookup = %v %d %s, want []: the order came after the lookup arrived", a.err, a.r.Status, a.r.Body)
	}
}
