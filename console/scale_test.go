package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// cloneInReview copies op (in review) n-1 times under new ids, keys and
// external keys: a queue of n open review items without n round trips.
const cloneInReview = `
WITH clone AS (SELECT g, gen_random_uuid() AS id FROM generate_series(1, $2::int - 1) g)
INSERT INTO operations
SELECT (jsonb_populate_record(NULL::operations, to_jsonb(o) || jsonb_build_object(
    'id', c.id, 'key', o.key || '-' || c.g, 'external_key', 'al_' || c.id,
    'updated_at', o.updated_at + c.g * interval '1 millisecond'))).*
FROM operations o, clone c
WHERE o.id = $1`

// queueOf fills the pipeline's tenant's review queue with n items.
func queueOf(t *testing.T, p *testpipeline.Pipeline, n int) {
	t.Helper()
	op := inReview(t, p, "po-scale", ledger.ReasonOutcomeUnknown, "ops")
	if _, err := p.Pool.Exec(context.Background(), cloneInReview, op.ID, n); err != nil {
		t.Fatal(err)
	}
}

// serverTime renders path for the session's cookie straight through the
// handler: the server's time, without the client's.
func serverTime(p *testpipeline.Pipeline, s *session, path string) (time.Duration, *httptest.ResponseRecorder) {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	u, _ := http.NewRequest(http.MethodGet, s.base+path, nil)
	for _, ck := range s.client.Jar.Cookies(u.URL) {
		req.AddCookie(ck)
	}
	rec := httptest.NewRecorder()
	start := time.Now()
	p.API.Config.Handler.ServeHTTP(rec, req)
	return time.Since(start), rec
}

var itemBox = regexp.MustCompile(`name="item" value="op:([0-9a-f-]{36})"`)
var nextLink = regexp.MustCompile(`<a href="(/console/review\?[^"]+)">Next page`)

// TestReviewQueuePagesAThousandItems: 1,000 open items are listed a page
// at a time, every one exactly once; the server's render time of a page is
// logged (the goal is under 100 ms; a timed assertion would flake on a
// loaded machine).
func TestReviewQueuePagesAThousandItems(t *testing.T) {
	t.Parallel()
	p := setup(t)
	queueOf(t, p, 1000)
	s := signIn(t, p, p.Operator)
	seen := make(map[string]bool)
	path := "/console/review"
	for pages := 0; path != ""; pages++ {
		if pages > 25 {
			t.Fatal("the pages never end")
		}
		d, rec := serverTime(p, s, strings.ReplaceAll(path, "&amp;", "&"))
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d", path, rec.Code)
		}
		body := rec.Body.String()
		if pages == 0 {
			t.Logf("review queue, first page of 50 of 1,000 items: server time %s", d)
		}
		for _, m := range itemBox.FindAllStringSubmatch(body, -1) {
			if seen[m[1]] {
				t.Fatalf("%s listed twice", m[1])
			}
			seen[m[1]] = true
		}
		path = ""
		if m := nextLink.FindStringSubmatch(body); m != nil {
			path = m[1]
		}
	}
	if len(seen) != 1000 {
		t.Fatalf("the pages listed %d items, want 1000", len(seen))
	}
	d, rec := serverTime(p, s, "/console/review?limit=200")
	t.Logf("review queue, page of 200 of 1,000 items: server time %s (%d bytes)", d, rec.Body.Len())
	d, _ = serverTime(p, s, "/console/review?owner=nobody")
	t.Logf("review queue filtered to nothing over 1,000 items: server time %s", d)
}
