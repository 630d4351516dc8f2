package mocksupplier_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
)

type configReply struct {
	Idempotency string `json:"idempotency"`
	LookupLagMS int64  `json:"lookup_lag_ms"`
	Webhook     *struct {
		URL       string `json:"url"`
		SecretSet bool   `json:"secret_set"`
		DelayMS   int64  `json:"delay_ms"`
	} `json:"webhook"`
}

func decode[T any](t *testing.T, r reply) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("decoding %s: %v", r.Body, err)
	}
	return v
}

func TestAdminConfigRoundTrip(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})

	set := f.must(t, http.MethodPost, "/admin/config", "",
		`{"idempotency":"ignore","lookup_lag_ms":1500,"webhook":{"url":"http://127.0.0.1:1/hook","secret":"s3cret","delay_ms":250}}`)
	if set.Status != http.StatusOK {
		t.Fatalf("POST /admin/config: status %d, body %s", set.Status, set.Body)
	}
	got := f.must(t, http.MethodGet, "/admin/config", "", "")
	cfg := decode[configReply](t, got)
	if cfg.Idempotency != "ignore" || cfg.LookupLagMS != 1500 || cfg.Webhook == nil ||
		cfg.Webhook.URL != "http://127.0.0.1:1/hook" || !cfg.Webhook.SecretSet || cfg.Webhook.DelayMS != 250 {
		t.Errorf("GET /admin/config = %s, want what was set", got.Body)
	}
	if strings.Contains(string(got.Body)+string(set.Body), "s3cret") {
		t.Error("the webhook secret is echoed")
	}

	// A partial update leaves the other settings alone.
	cfg = decode[configReply](t, f.must(t, http.MethodPost, "/admin/config", "", `{"lookup_lag_ms":0}`))
	if cfg.Idempotency != "ignore" || cfg.LookupLagMS != 0 || cfg.Webhook == nil {
		t.Errorf("after a partial update: %+v", cfg)
	}
	cfg = decode[configReply](t, f.must(t, http.MethodPost, "/admin/config", "", `{"webhook":null}`))
	if cfg.Webhook != nil || cfg.Idempotency != "ignore" {
		t.Errorf("after webhook:null: %+v, want webhooks off and the rest kept", cfg)
	}

	// The settings are in force.
	f.create(t, "key-1", `{"client_reference":"po-1"}`)
	f.create(t, "key-1", `{"client_reference":"po-1"}`)
	if n := f.sup.Orders("po-1"); n != 2 {
		t.Errorf("Orders(po-1) = %d in ignore mode, want 2", n)
	}
	if n := len(f.lookup(t, "po-1")); n != 2 {
		t.Errorf("lookup found %d orders with no lag, want 2", n)
	}
}

func TestAdminRefusesBadInputAndChangesNothing(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, path, body string }{
		{"config not JSON", "/admin/config", `{`},
		{"config unknown field", "/admin/config", `{"idempotence":"ignore"}`},
		{"config unknown mode", "/admin/config", `{"idempotency":"sometimes"}`},
		{"config negative lag", "/admin/config", `{"lookup_lag_ms":-1,"idempotency":"ignore"}`},
		{"config webhook without url", "/admin/config", `{"webhook":{"secret":"s"}}`},
		{"config webhook unknown field", "/admin/config", `{"webhook":{"url":"http://x","delay":5}}`},
		{"faults unknown kind", "/admin/faults", `{"faults":[{"kind":"explode"}]}`},
		{"faults negative ms", "/admin/faults", `{"faults":[{"kind":"delay","ms":-5}]}`},
		{"faults unknown field", "/admin/faults", `{"ref":"po-1","faults":[]}`},
		{"orders params not an object", "/admin/orders", `{"client_reference":"po-1","params":[1]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, mocksupplier.Config{})

			r := f.must(t, http.MethodPost, tt.path, "", tt.body)

			if r.Status != http.StatusBadRequest {
				t.Errorf("status = %d, want 400; body %s", r.Status, r.Body)
			}
			cfg := decode[configReply](t, f.must(t, http.MethodGet, "/admin/config", "", ""))
			if cfg.Idempotency != "honour" || cfg.LookupLagMS != 0 || cfg.Webhook != nil {
				t.Errorf("config changed to %+v", cfg)
			}
			if c := f.create(t, "k", `{"client_reference":"po-1"}`); c.Status != http.StatusCreated {
				t.Errorf("a create after the refused call: status %d, want 201 (no fault queued)", c.Status)
			}
		})
	}
}

func TestAdminFaultsQueueForReferenceAndWholeRun(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})

	r := f.must(t, http.MethodPost, "/admin/faults", "",
		`{"reference":"po-1","faults":[{"kind":"unavailable_before_commit","retry_after_s":3},{"kind":"delay","ms":1}]}`)
	if r.Status != http.StatusOK {
		t.Fatalf("POST /admin/faults: status %d, body %s", r.Status, r.Body)
	}
	f.must(t, http.MethodPost, "/admin/faults", "", `{"faults":[{"kind":"reject_422"}]}`)

	first := f.create(t, "k1", `{"client_reference":"po-1"}`)
	if first.Status != http.StatusServiceUnavailable || first.Header.Get("Retry-After") != "3" {
		t.Errorf("po-1 first: %d Retry-After %q, want 503 with 3", first.Status, first.Header.Get("Retry-After"))
	}
	if s := f.create(t, "k1", `{"client_reference":"po-1"}`).Status; s != http.StatusCreated {
		t.Errorf("po-1 second (delay 1ms): status %d, want 201", s)
	}
	if s := f.create(t, "k2", `{"client_reference":"po-2"}`).Status; s != http.StatusUnprocessableEntity {
		t.Errorf("po-2: status %d, want the whole-run 422", s)
	}
	f.must(t, http.MethodPost, "/admin/faults", "", `{"reference":"po-3","faults":[{"kind":"reject_422"}]}`)
	f.must(t, http.MethodPost, "/admin/faults", "", `{"reference":"po-3","faults":[]}`)
	if s := f.create(t, "k3", `{"client_reference":"po-3"}`).Status; s != http.StatusCreated {
		t.Errorf("po-3 after its queue was cleared: status %d, want 201", s)
	}
}

func TestAdminOrdersCreatesAndCountsByReference(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{LookupLag: time.Hour})

	for range 2 {
		r := f.must(t, http.MethodPost, "/admin/orders", "", `{"client_reference":"po-9","params":{"sku":"nut"}}`)
		if r.Status != http.StatusCreated || string(r.order(t).Params) != `{"sku":"nut"}` {
			t.Fatalf("POST /admin/orders: %d %s", r.Status, r.Body)
		}
	}
	f.create(t, "k", `{"client_reference":"po-8"}`)

	type ordersReply struct {
		Total       int                  `json:"total"`
		ByReference map[string]int       `json:"by_reference"`
		Orders      []mocksupplier.Order `json:"orders"`
	}
	all := decode[ordersReply](t, f.must(t, http.MethodGet, "/admin/orders", "", ""))
	if all.Total != 3 || len(all.Orders) != 3 || all.ByReference["po-9"] != 2 || all.ByReference["po-8"] != 1 {
		t.Errorf("GET /admin/orders = %+v, want 3 orders: po-9×2, po-8×1 (the lookup lag does not apply)", all)
	}
	one := decode[ordersReply](t, f.must(t, http.MethodGet, "/admin/orders?client_reference=po-9", "", ""))
	if one.Total != 2 || len(one.Orders) != 2 || len(one.ByReference) != 1 {
		t.Errorf("GET /admin/orders?client_reference=po-9 = %+v, want its 2 orders only", one)
	}
	none := f.must(t, http.MethodGet, "/admin/orders?client_reference=nobody", "", "")
	if !strings.Contains(string(none.Body), `"orders":[]`) || !strings.Contains(string(none.Body), `"nobody":0`) {
		t.Errorf("GET /admin/orders for an unknown reference = %s, want zero and []", none.Body)
	}
	if got := f.sup.Orders("po-9"); got != 2 {
		t.Errorf("Orders(po-9) = %d, want 2", got)
	}
	if got := f.sup.TotalOrders(); got != 3 {
		t.Errorf("TotalOrders = %d, want 3", got)
	}
}

func TestAdminRequestsReportsEachCreateWithItsTime(t *testing.T) {
	t.Parallel()
	clk := newClock()
	f := setup(t, mocksupplier.Config{Now: clk.Now})
	t0 := clk.Now()
	f.create(t, "k1", `{"client_reference":"po-1"}`)
	clk.Advance(time.Second)
	f.create(t, "k1", `{"client_reference":"po-1"}`)
	f.create(t, "k2", `{"client_reference":"po-2"}`)

	type requestsReply struct {
		Total       int `json:"total"`
		ByReference map[string]struct {
			Count      int         `json:"count"`
			ReceivedAt []time.Time `json:"received_at"`
		} `json:"by_reference"`
	}
	all := decode[requestsReply](t, f.must(t, http.MethodGet, "/admin/requests", "", ""))
	po1 := all.ByReference["po-1"]
	if all.Total != 3 || po1.Count != 2 || all.ByReference["po-2"].Count != 1 {
		t.Fatalf("GET /admin/requests = %+v, want 3: po-1×2, po-2×1", all)
	}
	if !po1.ReceivedAt[0].Equal(t0) || !po1.ReceivedAt[1].Equal(t0.Add(time.Second)) {
		t.Errorf("po-1 received_at = %v, want %v and one second later", po1.ReceivedAt, t0)
	}
	one := decode[requestsReply](t, f.must(t, http.MethodGet, "/admin/requests?client_reference=po-2", "", ""))
	if one.Total != 1 || len(one.ByReference) != 1 {
		t.Errorf("filtered by po-2 = %+v, want its one request", one)
	}
}

func TestAdminResetClearsEverything(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	first := f.create(t, "key-1", `{"client_reference":"po-1"}`).order(t)
	f.must(t, http.MethodPost, "/admin/config", "", `{"idempotency":"ignore","lookup_lag_ms":60000}`)
	f.must(t, http.MethodPost, "/admin/faults", "", `{"faults":[{"kind":"reject_422"}]}`)

	if r := f.must(t, http.MethodPost, "/admin/reset", "", ""); r.Status != http.StatusNoContent {
		t.Fatalf("POST /admin/reset: status %d", r.Status)
	}

	if n := f.sup.TotalOrders(); n != 0 {
		t.Errorf("TotalOrders = %d after reset, want 0", n)
	}
	if n := len(f.sup.CreateRequests("po-1")); n != 0 {
		t.Errorf("CreateRequests(po-1) = %d after reset, want 0", n)
	}
	cfg := decode[configReply](t, f.must(t, http.MethodGet, "/admin/config", "", ""))
	if cfg.Idempotency != "honour" || cfg.LookupLagMS != 0 {
		t.Errorf("config after reset = %+v, want the one given to New", cfg)
	}
	r := f.create(t, "key-1", `{"client_reference":"po-1"}`)
	if r.Status != http.StatusCreated || r.replayed() || r.order(t).ID == first.ID {
		t.Errorf("same key after reset: %d replayed %v, want a fresh order (keys and faults forgotten)", r.Status, r.replayed())
	}
	if n := len(f.lookup(t, "po-1")); n != 1 {
		t.Errorf("lookup after reset found %d, want 1", n)
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})

	r := f.must(t, http.MethodGet, "/healthz", "", "")

	if r.Status != http.StatusOK {
		t.Errorf("GET /healthz: status %d", r.Status)
	}
}

func TestAdminConfigSetsTheLookupDelay(t *testing.T) {
	t.Parallel()
	f := setup(t, mocksupplier.Config{})
	r := f.must(t, http.MethodPost, "/admin/config", "", `{"lookup_delay_ms":150}`)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"lookup_delay_ms":150`) {
		t.Fatalf("set lookup delay: %d %s", r.Status, r.Body)
	}
	start := time.Now()
	f.lookup(t, "po-1")
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Errorf("lookup answered after %s, want at least 150ms", took)
	}
	if r := f.must(t, http.MethodPost, "/admin/config", "", `{"lookup_delay_ms":-1}`); r.Status != http.StatusBadRequest {
		t.Errorf("negative delay: %d, want 400", r.Status)
	}
}
