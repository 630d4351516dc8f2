package api_test

import (
	"testing"

	"github.com/actledger/actledger/internal/testdb"
)

// TestPostgresOutageAnswers503AndRecovers cuts the API's connections to
// Postgres: requests answer 503 (never 500, never a half-written
// operation), and the service recovers by itself when Postgres is back.
func TestPostgresOutageAnswers503AndRecovers(t *testing.T) {
	t.Parallel()
	pool, proxy := testdb.NewBehindProxy(t)
	f := setupWithPool(t, pool)
	approval := f.approve(t, `{"sku":"A-1"}`, `,"max_uses":5`)

	proxy.Cut()
	for i, path := range []string{"/v1/operations", "/v1/operations", "/v1/approvals"} {
		body := opBody("po-1", `{"sku":"A-1"}`, approval)
		token := f.agent
		if path == "/v1/approvals" {
			body, token = []byte(`{"action":"supplier.create_order","params":{},"ttl_seconds":60,"policy_version":"p1"}`), f.approver
		}
		r := f.do(t, "POST", path, token, body)
		if r.status != 503 || r.errorCode() != "unavailable" {
			t.Errorf("request %d during outage: %d %s, want 503 unavailable", i, r.status, r.raw)
		}
	}
	if r := f.do(t, "GET", "/readyz", "", nil); r.status != 503 {
		t.Errorf("/readyz during outage: %d", r.status)
	}

	proxy.Restore()
	r := f.do(t, "POST", "/v1/operations", f.agent, opBody("po-1", `{"sku":"A-1"}`, approval))
	if r.status != 201 {
		t.Fatalf("after recovery: %d %s, want 201", r.status, r.raw)
	}
	if n := f.count(t, "operations"); n != 1 {
		t.Errorf("operations = %d, want 1 (nothing half-written during the outage)", n)
	}
}
