package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/actledger/actledger/internal/testpipeline"
)

// TestAnAnonymousScrapeIsRefusedAndWritesNothing: GET /metrics counts
// every tenant's work, so it answers only a token of role metrics (no
// token 401, a tenant's agent, approver or operator 403), and no scrape,
// refused or served, writes to the database: the counts' deltas stay
// until the folder's timer folds them. Before, anyone could scrape, and
// each scrape ran the fold (a DELETE and an INSERT).
func TestAnAnonymousScrapeIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Metrics: true})
	for _, key := range []string{"po-m1", "po-m2"} {
		if status, out := p.Propose(key, `{"sku":"A-1","qty":2}`); status != http.StatusAccepted {
			t.Fatalf("propose: %d %v", status, out)
		}
	}
	// writes is what a fold changes: the rows of the deltas and of the
	// folded counts.
	writes := func() string {
		t.Helper()
		var deltas, folded int
		if err := p.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM operation_count_deltas), (SELECT count(*) FROM operation_counts)`).Scan(&deltas, &folded); err != nil {
			t.Fatal(err)
		}
		if deltas == 0 && folded == 0 {
			t.Fatal("no counts at all: nothing a scrape could fold")
		}
		return fmt.Sprintf("%d deltas, %d folded counts", deltas, folded)
	}
	before := writes()
	scrape := func(token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, p.API.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	for _, tc := range []struct {
		name, token string
		status      int
	}{
		{"anonymous", "", http.StatusUnauthorized},
		{"a wrong token", "alt_nonsense", http.StatusUnauthorized},
		{"the tenant's agent", p.Agent, http.StatusForbidden},
		{"the tenant's approver", p.Approver, http.StatusForbidden},
		{"the tenant's operator", p.Operator, http.StatusForbidden},
	} {
		if status, body := scrape(tc.token); status != tc.status || strings.Contains(body, "actledger_operations") {
			t.Errorf("%s: GET /metrics = %d, want %d and no metrics", tc.name, status, tc.status)
		}
	}
	if after := writes(); after != before {
		t.Errorf("refused scrapes changed the counts' tables: %s → %s", before, after)
	}
	status, body := scrape(p.MetricsToken())
	if status != http.StatusOK || !strings.Contains(body, `actledger_operations{state="awaiting_approval"} 2`) {
		t.Errorf("a metrics token's scrape = %d, want 200 with the counts:\n%s", status, body)
	}
	if after := writes(); after != before {
		t.Errorf("a served scrape changed the counts' tables: %s → %s", before, after)
	}
}
