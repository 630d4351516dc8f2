package api_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testpoll"
	"github.com/actledger/actledger/ledger"
)

// waitFixture is an API with its watcher running, and a second pool and
// store on the same database: another process's view of the ledger.
type waitFixture struct {
	*fixture
	watcher *ledger.Watcher
	other   *ledger.Store
	// otherPool is other's pool: another process's connections.
	otherPool *pgxpool.Pool
}

func setupWait(t *testing.T, opts ...option) *waitFixture {
	t.Helper()
	pool, url := testdb.NewWithURL(t)
	f := setupWithPool(t, pool, opts...)
	watcher := f.app.Watcher
	if err := watcher.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watcher.Stop)
	otherPool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(otherPool.Close)
	return &waitFixture{fixture: f, watcher: watcher, other: ledger.New(otherPool, ledger.Config{}), otherPool: otherPool}
}

// holdElsewhere moves operation id from queued to held through the other
// process's store, and returns when that has committed.
func (f *waitFixture) holdElsewhere(t *testing.T, id string, version int64) {
	t.Helper()
	if _, err := f.other.Record(context.Background(), ledger.Change{
		ID: uuid.MustParse(id), From: ledger.StatusQueued, Version: version, To: ledger.StatusHeld,
		Kind: "approval_revoked", Actor: "test:other-process",
	}); err != nil {
		t.Fatal(err)
	}
}

// getWaiting is GET /v1/operations/{id}?wait= with If-None-Match.
func (f *waitFixture) getWaiting(t *testing.T, id, wait, ifNoneMatch string) response {
	t.Helper()
	req, err := http.NewRequest("GET", f.srv.URL+"/v1/operations/"+id+"?wait="+wait, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.agent)
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	return send(t, req)
}

// untilWaiting polls (bounded) until n readers wait on the watcher.
func (f *waitFixture) untilWaiting(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	testpoll.Until(t, timeout, func() error {
		if got := f.watcher.Waiting(); got < n {
			return fmt.Errorf("%d readers waiting, want %d", got, n)
		}
		return nil
	})
}

// TestEveryOperationViewCarriesItsVersionAsETag: the create answer, its
// replay, a read and a read by key all send ETag "<version>".
func TestEveryOperationViewCarriesItsVersionAsETag(t *testing.T) {
	t.Parallel()
	f := setup(t)
	params := `{"sku":"A-1"}`
	approval := f.approve(t, params, "")
	created := f.do(t, "POST", "/v1/operations", f.agent, opBody("po-1", params, approval))
	replayed := f.do(t, "POST", "/v1/operations", f.agent, opBody("po-1", params, approval))
	id := created.str("id")
	read := f.do(t, "GET", "/v1/operations/"+id, f.agent, nil)
	byKey := f.do(t, "GET", "/v1/operations?action="+action+"&key=po-1", f.agent, nil)
	for name, r := range map[string]response{"create": created, "replay": replayed, "get": read, "by key": byKey} {
		if got := r.header.Get("ETag"); got != `"1"` {
			t.Errorf("%s (%d): ETag %q, want \"1\"", name, r.status, got)
		}
	}
	moved := f.move(t, id, ledger.StatusSucceeded, time.Time{})
	read = f.do(t, "GET", "/v1/operations/"+id, f.agent, nil)
	if got, want := read.header.Get("ETag"), strconv.Quote(strconv.FormatInt(moved.Version, 10)); got != want {
		t.Errorf("after two transitions: ETag %s, want %s", got, want)
	}
}

// TestLongPollWakesOnAChangeByAnotherProcess: a reader waiting with
// If-None-Match gets the new version as soon as a transition commits
// through another pool and store (another process): the wake-up comes
// from the database, not from this process's own writes. Nothing polls,
// so without the database's notification the reader would wait out its
// 25 s; the bound of 10 s tells the two apart with room for a machine
// that compiles the rest of the suite beside it (1.2 s seen then; a few
// milliseconds when idle, which the log line shows).
func TestLongPollWakesOnAChangeByAnotherProcess(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	id := f.queuedOperation(t, "po-1")
	got := make(chan response, 1)
	var answered time.Time
	go func() {
		r := f.getWaiting(t, id, "25s", `"1"`)
		answered = time.Now()
		got <- r
	}()
	f.untilWaiting(t, 1, 10*time.Second)
	f.holdElsewhere(t, id, 1)
	committed := time.Now()
	var r response
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the long poll did not answer after the change")
	}
	if r.status != http.StatusOK || r.str("status") != string(ledger.StatusHeld) || r.header.Get("ETag") != `"2"` {
		t.Fatalf("long poll answered %d, status %q, ETag %q; want 200, held, \"2\"", r.status, r.str("status"), r.header.Get("ETag"))
	}
	lag := answered.Sub(committed)
	if lag > 10*time.Second {
		t.Errorf("long poll answered %s after the commit, want well within its 25 s wait (the database's notification)", lag)
	}
	t.Logf("long poll answered %s after the other process's commit", lag)
}

// TestLongPollAnswers304AfterItsWait: nothing changes, so the wait runs
// out and the answer is 304 with the same ETag; a stale or missing
// If-None-Match answers at once, and a wait past 60 s is refused.
func TestLongPollAnswers304AfterItsWait(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	id := f.queuedOperation(t, "po-1")

	start := time.Now()
	r := f.getWaiting(t, id, "700ms", `"1"`)
	if elapsed := time.Since(start); r.status != http.StatusNotModified || elapsed < 700*time.Millisecond {
		t.Errorf("unchanged: %d after %s, want 304 after at least 700ms", r.status, elapsed)
	}
	if r.header.Get("ETag") != `"1"` || r.raw != "" {
		t.Errorf("304 with ETag %q and body %q, want \"1\" and none", r.header.Get("ETag"), r.raw)
	}
	for _, inm := range []string{"", `"7"`, `W/"0"`} {
		start := time.Now()
		r := f.getWaiting(t, id, "25s", inm)
		if elapsed := time.Since(start); r.status != http.StatusOK || elapsed > 5*time.Second {
			t.Errorf("If-None-Match %q: %d after %s, want 200 at once", inm, r.status, elapsed)
		}
	}
	if r := f.getWaiting(t, id, "", `"1"`); r.status != http.StatusNotModified {
		t.Errorf("matching If-None-Match without wait: %d, want 304 at once", r.status)
	}
	for _, wait := range []string{"61s", "2m", "-1s", "soon"} {
		if r := f.getWaiting(t, id, wait, `"1"`); r.status != http.StatusBadRequest || r.errorCode() != "invalid_query" {
			t.Errorf("wait=%s: %d %s, want 400 invalid_query", wait, r.status, r.raw)
		}
	}
	if f.watcher.Waiting() != 0 {
		t.Errorf("%d waiters still registered after every poll answered", f.watcher.Waiting())
	}
}

// TestLongPollOutlivesTheServersWriteTimeout: behind api.NewHTTPServer
// with a WriteTimeout shorter than the wait, the long poll still delivers
// its answer (it extends its own write deadline).
func TestLongPollOutlivesTheServersWriteTimeout(t *testing.T) {
	t.Parallel()
	f := setupWait(t)
	id := f.queuedOperation(t, "po-1")
	srv := api.NewHTTPServer(f.srv.Config.Handler, api.HTTPLimits{WriteTimeout: 300 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/v1/operations/"+id+"?wait=1s", nil)
	req.Header.Set("Authorization", "Bearer "+f.agent)
	req.Header.Set("If-None-Match", `"1"`)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("long poll past the WriteTimeout was cut off: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotModified {
		t.Errorf("status %d, want 304", res.StatusCode)
	}
}

// TestThousandWaitersHoldAFewPostgresConnections: 1,000 readers waiting
// on one operation hold no Postgres connection each: while they wait the
// test database has at most the API pool's connections (one of them the
// listener), and one change made by another process answers them all.
func TestThousandWaitersHoldAFewPostgresConnections(t *testing.T) {
	t.Parallel()
	const waiters = 1000
	f := setupWait(t)
	id := f.queuedOperation(t, "po-1")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: waiters}}
	t.Cleanup(client.CloseIdleConnections)
	var wg sync.WaitGroup
	statuses := make(chan int, waiters)
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", f.srv.URL+"/v1/operations/"+id+"?wait=60s", nil)
			req.Header.Set("Authorization", "Bearer "+f.agent)
			req.Header.Set("If-None-Match", `"1"`)
			res, err := client.Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			statuses <- res.StatusCode
		}()
	}
	f.untilWaiting(t, waiters, 50*time.Second)

	var conns int
	if err := f.otherPool.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&conns); err != nil {
		t.Fatal(err)
	}
	limit := int(f.pool.Config().MaxConns)
	if conns > limit {
		t.Errorf("%d waiters hold %d Postgres connections, want at most the pool's %d", waiters, conns, limit)
	}
	t.Logf("%d waiters, %d Postgres connections of the API process (pool max %d)", waiters, conns, limit)

	f.holdElsewhere(t, id, 1)
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[http.StatusOK] != waiters {
		t.Errorf("answers by status %v, want all %d 200", counts, waiters)
	}
}
