// Package testdb gives each test its own freshly migrated Postgres database.
//
// Tests run against the real Postgres named by TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable). The migrations and
// function files are applied once into a template database named after
// their content hash; every test then gets a copy (CREATE DATABASE
// ... TEMPLATE) of its own, so tests run in parallel and leave nothing
// behind. A package whose TestMain calls Main reuses its copies: a test's
// database is emptied when the test ends and given to the next one, and
// the last are dropped when the package's tests end (reuse.go).
package testdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/testproxy"
	"github.com/actledger/actledger/schema"
)

// DefaultURL is used when TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// testPoolConns is the least size of a test database's pool.
const testPoolConns = 8

// AdminURL is the URL of the server's maintenance database used to create
// and drop test databases.
func AdminURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// New creates a migrated database for t and returns a pool connected to it.
// The database is dropped when t ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, _ := NewWithURL(t)
	return pool
}

// NewWithURL is New that also returns the database's URL, for tests that
// start a process or a second pool against the same database.
func NewWithURL(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := connectAdmin(ctx, t)
	defer admin.Release()

	tmpl, err := ensureTemplate(ctx, admin.Conn())
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	return create(ctx, t, admin.Conn(), tmpl, true)
}

// NewEmpty creates a database for t without any migration, for tests of
// migrating itself (a database as an older binary left it), and returns a
// pool connected to it. The database is dropped when t ends.
func NewEmpty(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := connectAdmin(ctx, t)
	defer admin.Release()
	pool, _ := create(ctx, t, admin.Conn(), "", false)
	return pool
}

// NewFilled gives t a copy of a filled database: the migrated template
// plus the rows fill writes into it, built once per server and kept as a
// template of its own, named after the migrations and key. Tests that
// need a large ledger copy it in a second or two instead of each filling
// one for half a minute beside the others (three packages did, on the
// same two cores). key names what fill writes: two fills with one key
// must write alike. The copy is dropped when t ends, never reused.
func NewFilled(t testing.TB, key string, fill func(context.Context, *pgxpool.Pool) error) *pgxpool.Pool {
	t.Helper()
	// The first caller on a server fills while the others wait on the
	// lock: the fill's own time plus the copy.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := connectAdmin(ctx, t)
	defer admin.Release()

	base, err := ensureTemplate(ctx, admin.Conn())
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	tmpl, err := ensureFilled(ctx, admin.Conn(), base, key, fill)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	pool, _ := create(ctx, t, admin.Conn(), tmpl, false)
	return pool
}

// adminPool holds this process's connections to the server's
// maintenance database, which create and drop test databases. A
// connection of its own for each test was a session started and ended on
// the server for each of some thousand tests under make test (5 ms of the
// server's CPU each, docs/benchmarks.md).
var adminPool = sync.OnceValues(func() (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(AdminURL())
	if err != nil {
		return nil, err
	}
	// A connection is opened only when the ones open are all taken, and
	// one may wait long on a template's build (NewFilled's fill, under
	// the advisory lock): room for many tests of the process at once.
	cfg.MaxConns = max(cfg.MaxConns, adminConns)
	return pgxpool.NewWithConfig(context.Background(), cfg)
})

// adminConns is the least size of adminPool.
const adminConns = 16

// acquireAdmin takes a connection to the maintenance database from
// adminPool.
func acquireAdmin(ctx context.Context) (*pgxpool.Conn, error) {
	pool, err := adminPool()
	if err != nil {
		return nil, err
	}
	return pool.Acquire(ctx)
}

// connectAdmin is acquireAdmin, failing t when it cannot connect.
func connectAdmin(ctx context.Context, t testing.TB) *pgxpool.Conn {
	t.Helper()
	admin, err := acquireAdmin(ctx)
	if err != nil {
		t.Fatalf("testdb: connect to %s (is Postgres running? set TEST_DATABASE_URL): %v", AdminURL(), err)
	}
	return admin
}

// create gives t a database made from the template tmpl (the server's
// default, an empty database, when tmpl is ""): when reusable and the
// package's tests reuse databases (Main), one that an earlier test of this
// process emptied, a new one otherwise. It connects a pool to it and, when
// t ends, empties it for the next test or drops it.
func create(ctx context.Context, t testing.TB, admin *pgx.Conn, tmpl string, reusable bool) (*pgxpool.Pool, string) {
	t.Helper()
	reusable = reusable && tmpl != "" && reuse.enabled()
	var name string
	var ok bool
	if reusable {
		name, ok = reuse.take(tmpl)
	}
	if !ok {
		name = "actledger_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
		if tmpl == "" {
			if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
				t.Fatalf("testdb: create %s: %v", name, err)
			}
		} else if err := createFromTemplate(ctx, admin, name, tmpl); err != nil {
			t.Fatalf("testdb: create %s: %v", name, err)
		}
	}
	dbURL := withDatabase(t, AdminURL(), name)
	if !ok && reusable {
		// The first copy of the template is the template: its
		// fingerprint is the one every emptied copy must show again.
		if err := reuse.learn(ctx, tmpl, dbURL); err != nil {
			t.Fatalf("testdb: %v", errors.Join(err, drop(ctx, name)))
		}
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	// A running pipeline holds three connections in LISTEN (the relay,
	// the long-poll watcher, the token revocations); pgxpool's default of
	// four on two cores would leave one for everything else. serve's
	// pools have 32.
	cfg.MaxConns = max(cfg.MaxConns, testPoolConns)
	schema.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("testdb: connect %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var kept *pgx.Conn
		if reusable {
			kept = keepOne(ctx, pool)
		}
		pool.Close()
		if reusable {
			err := reuse.give(ctx, tmpl, name, dbURL, kept)
			if err == nil {
				return
			}
			t.Logf("testdb: %s is dropped, not reused: %v", name, err)
		}
		if err := drop(ctx, name); err != nil {
			t.Errorf("testdb: %v", err)
		}
	})
	return pool, dbURL
}

// drop drops the database name, closing its connections.
func drop(ctx context.Context, name string) error {
	conn, err := acquireAdmin(ctx)
	if err != nil {
		return fmt.Errorf("drop %s: %w", name, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop %s: %w", name, err)
	}
	return nil
}

// NewBehindProxy is New with the pool connected through a TCP proxy that
// the test cuts and restores to simulate a Postgres outage.
func NewBehindProxy(t testing.TB) (*pgxpool.Pool, *testproxy.Proxy) {
	t.Helper()
	_, dbURL := NewWithURL(t)
	return PoolBehindProxy(t, dbURL)
}

// PoolBehindProxy connects a second pool to the database at dbURL through
// a TCP proxy the test cuts and restores, beside a direct pool it keeps.
func PoolBehindProxy(t testing.TB, dbURL string) (*pgxpool.Pool, *testproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testproxy.New(t, u.Host)
	u.Host = proxy.Addr()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.ConnectTimeout = time.Second
	schema.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, proxy
}

// createFromTemplate retries briefly: CREATE DATABASE fails while another
// session is still connected to the template (e.g. the process that just
// migrated it is closing its pool).
func createFromTemplate(ctx context.Context, admin *pgx.Conn, name, tmpl string) error {
	var err error
	for range 50 {
		_, err = admin.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+tmpl)
		if err == nil || !strings.Contains(err.Error(), "being accessed by other users") {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// keepTemplates is how many templates of other migrations survive, so
// that a few checkouts (branches, worktrees) can test side by side on one
// server without dropping each other's template mid-run.
const keepTemplates = 4

// keepFilled is how many filled templates of other migrations or keys
// survive: each holds a large ledger, so fewer than keepTemplates.
const keepFilled = 2

// staleTemplates lists the templates named like $1 other than $2, except
// the $3 newest (by creation order: a database's oid grows with each
// CREATE DATABASE).
const staleTemplates = `SELECT datname FROM pg_database
WHERE datname LIKE $1 AND datname <> $2
ORDER BY oid DESC OFFSET $3`

// templateName names the template after the migrations and function
// files this binary embeds, hashed once per process: reading them parses
// every function file's requires line, some 20 ms a call under the race
// detector, and every New asks.
var templateName = sync.OnceValues(func() (string, error) {
	migrations, err := schema.Migrations()
	if err != nil {
		return "", err
	}
	functions, err := schema.Functions()
	if err != nil {
		return "", err
	}
	// A change of a function file changes the schema as much as a new
	// migration does: both name the template.
	h := sha256.New()
	for _, m := range migrations {
		h.Write([]byte(m.Version))
		h.Write([]byte(m.SQL))
	}
	for _, f := range functions {
		h.Write([]byte("functions/" + f.Name))
		h.Write([]byte(f.SQL))
	}
	return "actledger_tmpl_" + hex.EncodeToString(h.Sum(nil))[:16], nil
})

// ensureTemplate creates and migrates the template database for the current
// migrations unless it exists.
func ensureTemplate(ctx context.Context, admin *pgx.Conn) (string, error) {
	name, err := templateName()
	if err != nil {
		return "", err
	}
	return name, ensureBuilt(ctx, admin, template{
		name: name, kind: "template", like: `actledger\_tmpl\_%`, keep: keepTemplates,
		build: func(ctx context.Context, pool *pgxpool.Pool) error {
			_, err := schema.Migrate(ctx, pool, nil)
			return err
		},
	})
}

// DropFilled drops the filled template of key, for a test that filled
// one of its own.
func DropFilled(ctx context.Context, key string) error {
	base, err := templateName()
	if err != nil {
		return err
	}
	return drop(ctx, filledName(base, key))
}

// filledName names the filled template of base and key.
func filledName(base, key string) string {
	h := sha256.Sum256([]byte(base + "\x00" + key))
	return "actledger_filled_" + hex.EncodeToString(h[:])[:16]
}

// ensureFilled creates the filled template of base and key unless it
// exists: a copy of base that fill has written into.
func ensureFilled(ctx context.Context, admin *pgx.Conn, base, key string, fill func(context.Context, *pgxpool.Pool) error) (string, error) {
	name := filledName(base, key)
	return name, ensureBuilt(ctx, admin, template{
		name: name, kind: "filled template", like: `actledger\_filled\_%`, keep: keepFilled,
		from: base, build: fill,
	})
}

// template is a database ensureBuilt builds once per server.
type template struct {
	name string
	kind string // in errors and as the advisory lock's name
	// like matches the templates of its kind; all but the keep newest
	// of the others are dropped, since templates of older migrations
	// are of no use to this tree, but another checkout with other
	// migrations may be testing against the same server right now.
	like  string
	keep  int
	from  string // the template it is copied from; "" for an empty database
	build func(context.Context, *pgxpool.Pool) error
}

// ensureBuilt creates tmpl unless it exists, under an advisory lock of
// its kind that keeps parallel test binaries from building it twice, and
// drops the stale ones.
func ensureBuilt(ctx context.Context, admin *pgx.Conn, tmpl template) error {
	lock := "actledger_testdb_" + strings.ReplaceAll(tmpl.kind, " ", "_")
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock(hashtext($1))`, lock); err != nil {
		return fmt.Errorf("lock %s: %w", tmpl.kind, err)
	}
	defer func() {
		if _, err := admin.Exec(context.Background(), `SELECT pg_advisory_unlock(hashtext($1))`, lock); err != nil {
			// The connection goes back to adminPool: never with the
			// lock still held.
			_ = admin.Close(context.Background())
		}
	}()

	stale, err := admin.Query(ctx, staleTemplates, tmpl.like, tmpl.name, tmpl.keep)
	if err != nil {
		return fmt.Errorf("list stale %ss: %w", tmpl.kind, err)
	}
	names, err := pgx.CollectRows(stale, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list stale %ss: %w", tmpl.kind, err)
	}
	for _, old := range names {
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+old+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop stale %s %s: %w", tmpl.kind, old, err)
		}
	}
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, tmpl.name).Scan(&exists); err != nil {
		return fmt.Errorf("look up %s: %w", tmpl.kind, err)
	}
	if exists {
		return nil
	}
	building := tmpl.name + "_building"
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop stale %s: %w", tmpl.kind, err)
	}
	if tmpl.from == "" {
		_, err = admin.Exec(ctx, "CREATE DATABASE "+building)
	} else {
		err = createFromTemplate(ctx, admin, building, tmpl.from)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", tmpl.kind, err)
	}
	buildURL, err := replaceDatabase(AdminURL(), building)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, buildURL)
	if err != nil {
		return fmt.Errorf("connect %s: %w", tmpl.kind, err)
	}
	err = tmpl.build(ctx, pool)
	pool.Close()
	if err != nil {
		return fmt.Errorf("build %s: %w", tmpl.kind, err)
	}
	// Renaming last makes a crashed build invisible to the next run.
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+tmpl.name); err != nil {
		return fmt.Errorf("publish %s: %w", tmpl.kind, err)
	}
	return nil
}

func withDatabase(t testing.TB, raw, db string) string {
	t.Helper()
	u, err := replaceDatabase(raw, db)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	return u
}

func replaceDatabase(raw, db string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("TEST_DATABASE_URL must be a postgres:// URL, got %q", raw)
	}
	u.Path = "/" + db
	return u.String(), nil
}
