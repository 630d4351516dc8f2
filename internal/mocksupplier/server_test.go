package mocksupplier_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/mocksupplier/internal/faketest"
)

// fixture is a mock supplier served over a real socket, and a client that never reuses
// connections, so Go's transport never silently re-sends a request (see
// TestTransportResendsIdempotentPOSTAfterDropOnReusedConnection for what it would do).
type fixture struct {
	sup    *mocksupplier.Server
	url    string
	client *http.Client
}

func setup(t *testing.T, cfg mocksupplier.Config) fixture {
	t.Helper()
	sup := mocksupplier.New(cfg)
	t.Cleanup(sup.Close)
	return fixture{sup: sup, url: faketest.Serve(t, sup), client: faketest.Client()}
}

// reply is what a client saw.
type reply struct{ faketest.Reply }

func (r reply) replayed() bool { return r.Header.Get("Idempotent-Replayed") == "true" }

func (r reply) order(t *testing.T) mocksupplier.Order {
	t.Helper()
	var o mocksupplier.Order
	r.Decode(t, &o)
	return o
}

func (r reply) errorCode(t *testing.T) string {
	t.Helper()
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	r.Decode(t, &e)
	return e.Error.Code
}

// do sends one request and returns the reply, or the transport error.
func (f fixture) do(client *http.Client, method, path, key, body string) (reply, error) {
	r, err := faketest.Do(client, method, f.url+path, body, "Content-Type", faketest.JSON(body), "Idempotency-Key", key)
	return reply{r}, err
}

// must is do for requests that are expected to get an answer.
func (f fixture) must(t *testing.T, method, path, key, body string) reply {
	t.Helper()
	r, err := f.do(f.client, method, path, key, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func (f fixture) create(t *testing.T, key, body string) reply {
	t.Helper()
	return f.must(t, http.MethodPost, "/v1/orders", key, body)
}

func (f fixture) lookup(t *testing.T, reference string) []mocksupplier.Order {
	t.Helper()
	r := f.must(t, http.MethodGet, "/v1/orders?client_reference="+reference, "", "")
	if r.Status != http.StatusOK {
		t.Fatalf("lookup %s: status %d, body %s", reference, r.Status, r.Body)
	}
	var orders []mocksupplier.Order
	if err := json.Unmarshal(r.Body, &orders); err != nil {
		t.Fatalf("decoding lookup %s: %v", r.Body, err)
	}
	return orders
}

// newClock is a settable Config.Now.
func newClock() *faketest.Clock {
	return faketest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
}

func TestCreateReturnsOrderWithReferenceAndParams(t *testing.T) {
	t.Parallel()
	clk := newClock()
	f := setup(t, mocksupplier.Config{Now: clk.Now})

	r := f.create(t, "", `{"sku":"bolt-m8", "client_reference":"po-1","qty":12.50}`)

	if r.Status != http.StatusCreated {
		t.Fatalf("status = %d, want 201; body %s", r.Status, r.Body)
	}
	if r.replayed() {
		t.Error("a first request is marked Idempotent-Replayed")
	}
	o := r.order(t)
	if !strings.HasPrefix(o.ID, "ord_") || len(o.ID) < 20 {
		t.Errorf("id = %q, want ord_<random>", o.ID)
	}
	if got, want := o.ClientReference, "po-1"; got != want {
		t.Errorf("client_reference = %q, want %q", got, want)
	}
	if got, want := o.Status, "created"; got != want {
		t.Errorf("status = %q, want %q", got, want)
	}
	if !o.CreatedAt.Equal(clk.Now()) {
		t.Errorf("created_at = %v, want the clock's %v", o.CreatedAt, clk.Now())
	}
	if got, want := string(o.Params), `{"client_reference":"po-1","qty":12.50,"sku":"bolt-m8"}`; got != want {
		t.Errorf("params = %s, want %s (keys sorted, numbers untouched)", got, want)
	}
	if got := f.sup.Orders("po-1"); got != 1 {
		t.Errorf("Orders(po-1) = %d, want 1", got)
	}
}

func TestCreateRefusesMalformedBodyAndCreatesNothing(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, body string }{
		{"empty", ""},
		{"truncated", `{"client_reference":"po-1"`},
		{"array", `[{"client_reference":"po-1"}]`},
		{"null", `null`},
		{"two objects", `{} {}`},
		{"reference not a string", `{"client_reference":42}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, mocksupplier.Config{})

			r := f.create(t, "key-1", tt.body)

			if r.Status != http.StatusBadRequest {
				t.Errorf("status = %d, want 400; body %s", r.Status, r.Body)
			}
			if got, want := r.errorCode(t), "malformed_json"; got != want {
				t.Errorf("error code = %q, want %q", got, want)
			}
			if got := f.sup.TotalOrders(); got != 0 {
				t.Errorf("TotalOrders = %d, want 0", got)
			}
			// The key was not consumed by a request that never began.
			if r := f.create(t, "key-1", `{"client_reference":"po-1"}`); r.Status != http.StatusCreated {
				t.Errorf("valid request with the same key: status %d, want 201", r.Status)
			}
		})
	}
}

func TestIdempotentReplayReturnsSameOrderAndCreatesOne(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, first, repeat string }{
		{"identical body", `{"client_reference":"po-1","qty":1}`, `{"client_reference":"po-1","qty":1}`},
		{"key order and whitespace differ", `{"client_reference":"po-1","qty":1}`, ` { "qty" : 1 , "client_reference" : "po-1" } `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, mocksupplier.Config{})

			first := f.create(t, "key-1", tt.first)
			again := f.create(t, "key-1", tt.repeat)

			if first.Status != http.StatusCreated || again.Status != http.StatusCreated {
				t.Fatalf("statuses = %d, %d, want 201, 201", first.Status, again.Status)
			}
			if !again.replayed() {
				t.Error("repeat lacks Idempotent-Replayed: true")
			}
			if got, want := again.order(t).ID, first.order(t).ID; got != want {
				t.Errorf("replayed order id = %q, want the first %q", got, want)
			}
			if got := f.sup.Orders("po-1"); got != 1 {
				t.Errorf("Orders(po-1) = %d, want 1", got)
			}
			if got := len(f.sup.CreateRequests("po-1")); got != 2 {
				t.Errorf("CreateRequests(po-1) = %d, want 2 (replays are counted)", got)
			}
		})
	}
}

func TestSameKeyWithDifferentBodyIsRefused(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})

	f.create(t, "key-1", `{"client_reference":"po-1","qty":1}`)
	r := f.create(t, "key-1", `{"client_reference":"po-1","qty":2}`)

	if r.Status != http.StatusBadRequest {
		t.Fatalf("status = %d, want 400; body %s", r.Status, r.Body)
	}
	if got, want := r.errorCode(t), "idempotency_key_reused"; got != want {
		t.Errorf("error code = %q, want %q", got, want)
	}
	if got := f.sup.Orders("po-1"); got != 1 {
		t.Errorf("Orders(po-1) = %d, want 1", got)
	}
}

func TestConcurrentSameKeyCreatesExactlyOneOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		faults []mocksupplier.Fault
	}{
		{"fast supplier", nil},
		// The first request holds the key for a while, so the others find it in flight.
		{"slow first request", []mocksupplier.Fault{{Kind: mocksupplier.Delay, MS: 300}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, mocksupplier.Config{})
			f.sup.SetFaults("po-1", tt.faults...)

			const n = 20
			replies := make([]reply, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					r, err := f.do(f.client, http.MethodPost, "/v1/orders", "key-1", `{"client_reference":"po-1"}`)
					if err != nil {
						t.Errorf("request %d: %v", i, err)
					}
					replies[i] = r
				})
			}
			wg.Wait()

			created, ids := 0, map[string]bool{}
			for _, r := range replies {
				switch {
				case r.Status == http.StatusCreated && !r.replayed():
					created++
					ids[r.order(t).ID] = true
				case r.Status == http.StatusCreated:
					ids[r.order(t).ID] = true
				case r.Status == http.StatusConflict:
				default:
					t.Errorf("unexpected answer %d %s", r.Status, r.Body)
				}
			}
			if created != 1 {
				t.Errorf("fresh 201s = %d, want exactly 1", created)
			}
			if len(ids) != 1 {
				t.Errorf("distinct order ids seen = %d, want 1", len(ids))
			}
			if got := f.sup.Orders("po-1"); got != 1 {
				t.Errorf("Orders(po-1) = %d, want 1", got)
			}
		})
	}
}

func TestIgnoreModeCreatesAnOrderPerRequest(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{Idempotency: mocksupplier.Ignore})

	first := f.create(t, "key-1", `{"client_reference":"po-1"}`)
	again := f.create(t, "key-1", `{"client_reference":"po-1"}`)

	if first.Status != http.StatusCreated || again.Status != http.StatusCreated {
		t.Fatalf("statuses = %d, %d, want 201, 201", first.Status, again.Status)
	}
	if again.replayed() {
		t.Error("ignore mode replayed a response")
	}
	if first.order(t).ID == again.order(t).ID {
		t.Error("ignore mode returned the same order twice")
	}
	if got := f.sup.Orders("po-1"); got != 2 {
		t.Errorf("Orders(po-1) = %d, want 2", got)
	}
}

func TestLookupLagHidesNewOrdersThenShowsThem(t *testing.T) {
	t.Parallel()
	clk := newClock()
	f := setup(t, mocksupplier.Config{LookupLag: 2 * time.Second, Now: clk.Now})

	id := f.create(t, "key-1", `{"client_reference":"po-1"}`).order(t).ID

	if got := f.lookup(t, "po-1"); len(got) != 0 {
		t.Fatalf("lookup right after create = %v, want [] (hidden by the lag)", got)
	}
	if r := f.must(t, http.MethodGet, "/v1/orders/"+id, "", ""); r.Status != http.StatusOK {
		t.Errorf("GET by id during the lag: status %d, want 200 (reads by id are consistent)", r.Status)
	}
	clk.Advance(2*time.Second - time.Millisecond)
	if got := f.lookup(t, "po-1"); len(got) != 0 {
		t.Fatalf("lookup 1ms before the lag passed = %v, want []", got)
	}
	clk.Advance(time.Millisecond)
	got := f.lookup(t, "po-1")
	if len(got) != 1 || got[0].ID != id {
		t.Fatalf("lookup after the lag = %v, want the order %s", got, id)
	}

	f.sup.SetLookupLag(0)
	f.create(t, "key-2", `{"client_reference":"po-2"}`)
	if got := f.lookup(t, "po-2"); len(got) != 1 {
		t.Errorf("lookup with the lag set to 0 = %v, want one order", got)
	}
}

func TestLookupOfUnknownReferenceIsAnEmptyArray(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})

	r := f.must(t, http.MethodGet, "/v1/orders?client_reference=nobody", "", "")

	if r.Status != http.StatusOK || strings.TrimSpace(string(r.Body)) != "[]" {
		t.Errorf("got %d %s, want 200 []", r.Status, r.Body)
	}
}

func TestGetOrderByID(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	id := f.create(t, "", `{"client_reference":"po-1"}`).order(t).ID

	tests := []struct {
		id   string
		want int
	}{
		{id, http.StatusOK},
		{"ord_missing", http.StatusNotFound},
	}
	for _, tt := range tests {
		r := f.must(t, http.MethodGet, "/v1/orders/"+tt.id, "", "")
		if r.Status != tt.want {
			t.Errorf("GET /v1/orders/%s: status %d, want %d", tt.id, r.Status, tt.want)
		}
		if tt.want == http.StatusOK && r.order(t).ID != id {
			t.Errorf("GET /v1/orders/%s returned %s", tt.id, r.Body)
		}
	}
}

func TestCreateRequestsRecordsArrivalTimes(t *testing.T) {
	t.Parallel()
	clk := newClock()
	f := setup(t, mocksupplier.Config{Now: clk.Now})

	t0 := clk.Now()
	f.create(t, "key-1", `{"client_reference":"po-1"}`)
	clk.Advance(3 * time.Second)
	f.create(t, "key-1", `{"client_reference":"po-1"}`)

	got := f.sup.CreateRequests("po-1")
	want := []time.Time{t0, t0.Add(3 * time.Second)}
	if len(got) != len(want) {
		t.Fatalf("CreateRequests = %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Errorf("CreateRequests[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if got := f.sup.CreateRequests("po-other"); len(got) != 0 {
		t.Errorf("CreateRequests(po-other) = %v, want none", got)
	}
}

func TestNewPanicsOnUnknownMode(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("New accepted idempotency mode \"sometimes\"")
		}
	}()
	mocksupplier.New(mocksupplier.Config{Idempotency: "sometimes"})
}
