package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testcluster"
	"github.com/actledger/actledger/internal/testnats"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/internal/testpoll"
	"github.com/actledger/actledger/ledger"
)

// stuckAfter is the lease sweeper's bound in testpipeline: an operation
// whose dispatch message never came is published again after it.
const stuckAfter = 10 * time.Second

// clusterBroker connects a broker to every node of c, with the streams at
// 3 replicas under a fresh prefix.
func clusterBroker(t *testing.T, c *testcluster.Cluster) *broker.Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := broker.Connect(ctx, broker.Config{
		URL: c.URLs(), Prefix: testnats.Prefix(), Replicas: testcluster.Size,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatalf("connect to the cluster: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// clusterPipeline is a pipeline with every role on the cluster, against an
// honest supplier (keys honoured, lookup without lag).
func clusterPipeline(t *testing.T, c *testcluster.Cluster) (*testpipeline.Pipeline, *broker.Broker) {
	t.Helper()
	b := clusterBroker(t, c)
	p := testpipeline.New(t, testpipeline.Options{
		Idempotency: true, Mode: mocksupplier.Honour, Broker: b,
		Lease: 3 * time.Second, Timeout: time.Second, MaxElapsed: 2 * time.Minute, MaxAttempts: 20,
	})
	p.Start(2)
	return p, b
}

// load is a batch of approved requests, sent open-loop at a fixed rate
// (the send times do not wait for the answers).
type load struct {
	url, token string
	bodies     []string
	accepted   atomic.Int64
	mu         sync.Mutex
	refused    []string // non-201 answers and transport errors
}

// newLoad approves n operations (keys prefix-0..n-1) and prepares their
// requests.
func newLoad(p *testpipeline.Pipeline, prefix string, n int) *load {
	l := &load{url: p.API.URL + "/v1/operations", token: p.Agent}
	for i := range n {
		params := fmt.Sprintf(`{"sku":"%s-%d","qty":1}`, prefix, i)
		a := p.Approve(params, time.Hour)
		l.bodies = append(l.bodies, fmt.Sprintf(`{"action":%q,"key":"%s-%d","params":%s,"approval_id":%q}`,
			testpipeline.Action, prefix, i, params, a.ID))
	}
	return l
}

// run sends every request, perSecond of them a second, and returns when
// every answer is in.
func (l *load) run(perSecond int) {
	client := &http.Client{Timeout: 30 * time.Second}
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	var wg sync.WaitGroup
	for _, body := range l.bodies {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.send(client, body); err != nil {
				l.mu.Lock()
				l.refused = append(l.refused, err.Error())
				l.mu.Unlock()
				return
			}
			l.accepted.Add(1)
		}()
	}
	wg.Wait()
}

// send posts one request as an agent does: a transport error (the
// connection closed under it, no answer) is retried with the same key,
// which the API answers with the operation, created or replayed.
func (l *load) send(client *http.Client, body string) error {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
		}
		var req *http.Request
		if req, err = http.NewRequest("POST", l.url, bytes.NewBufferString(body)); err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+l.token)
		var res *http.Response
		if res, err = client.Do(req); err != nil {
			continue
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusCreated || (attempt > 0 && res.StatusCode == http.StatusOK) {
			return nil
		}
		return fmt.Errorf("%d %s", res.StatusCode, raw)
	}
	return err
}

// start runs the load in the background; the returned wait blocks until it
// is done and fails t on any refused request.
func (l *load) start(t *testing.T, perSecond int) (wait func()) {
	done := make(chan struct{})
	go func() { defer close(done); l.run(perSecond) }()
	return func() {
		t.Helper()
		<-done
		if len(l.refused) > 0 {
			t.Fatalf("%d of %d requests were not accepted; first: %s", len(l.refused), len(l.bodies), l.refused[0])
		}
	}
}

// waitAccepted waits until n requests were accepted.
func (l *load) waitAccepted(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	testpoll.Until(t, timeout, func() error {
		if got := l.accepted.Load(); got < int64(n) {
			return fmt.Errorf("only %d requests accepted, want %d", got, n)
		}
		return nil
	})
}

// statusCounts counts the database's operations by status.
func statusCounts(t *testing.T, pool *pgxpool.Pool) map[ledger.Status]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT status, count(*) FROM operations GROUP BY status`)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[ledger.Status]int{}
	for rows.Next() {
		var s ledger.Status
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		counts[s] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return counts
}

// waitAllSucceeded waits until the database holds want operations, all
// succeeded, and fails with the counts by status if that takes longer than
// timeout.
func waitAllSucceeded(t *testing.T, pool *pgxpool.Pool, want int, timeout time.Duration) {
	t.Helper()
	testpoll.Until(t, timeout, func() error {
		counts := statusCounts(t, pool)
		if counts[ledger.StatusSucceeded] == want && len(counts) == 1 {
			return nil
		}
		return unsucceeded{pool: pool, t: t, counts: counts, want: want}
	})
}

// unsucceeded is a database whose operations are not all succeeded yet;
// its message, written only when the wait fails, shows the first of the
// others.
type unsucceeded struct {
	t      *testing.T
	pool   *pgxpool.Pool
	counts map[ledger.Status]int
	want   int
}

func (e unsucceeded) Error() string {
	return fmt.Sprintf("operations by status %v, want %d succeeded; the first of the others:\n%s", e.counts, e.want, unfinished(e.t, e.pool))
}

// externalKeys lists every operation's external key.
func externalKeys(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT external_key FROM operations`)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// checkOneOrderEach fails t unless every operation has exactly one order
// at the supplier.
func checkOneOrderEach(t *testing.T, pool *pgxpool.Pool, s *mocksupplier.Server, want int) {
	t.Helper()
	keys := externalKeys(t, pool)
	if len(keys) != want {
		t.Fatalf("%d operations in the ledger, want %d", len(keys), want)
	}
	bad := 0
	for _, k := range keys {
		if n := s.Orders(k); n != 1 {
			if bad < 5 {
				t.Errorf("operation %s has %d orders at the supplier, want 1", k, n)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d operations do not have exactly one order", bad, len(keys))
	}
}

// maxLatency is the longest time from acceptance to the last change among
// the operations (for the log: how long the slowest one took).
func maxLatency(t *testing.T, pool *pgxpool.Pool) time.Duration {
	t.Helper()
	var ms int64
	err := pool.QueryRow(context.Background(),
		`SELECT (COALESCE(max(extract(epoch FROM updated_at - created_at)), 0) * 1000)::bigint FROM operations`).Scan(&ms)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(ms) * time.Millisecond
}

// unpublished counts outbox rows not yet published.
func unpublished(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// unfinished prints the events of up to three operations that have not
// succeeded, for a failure message.
func unfinished(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT o.external_key, o.status, string_agg(e.kind || ' ' || coalesce(e.from_status, '') || '→' || e.to_status
		       || ' at ' || to_char(e.at, 'HH24:MI:SS.MS') || ' by ' || e.actor, E'\n    ' ORDER BY e.seq)
		FROM operations o JOIN operation_events e ON e.operation_id = o.id
		WHERE o.id IN (SELECT id FROM operations WHERE status <> 'succeeded' ORDER BY created_at LIMIT 3)
		GROUP BY o.id, o.external_key, o.status`)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for rows.Next() {
		var key, status, events string
		if err := rows.Scan(&key, &status, &events); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "  %s (%s):\n    %s\n", key, status, events)
	}
	if err := rows.Err(); err != nil {
		return err.Error()
	}
	return b.String()
}
