package testdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Main runs a package's tests (call it from TestMain) with their databases
// reused: when a test ends, its database is emptied and given to the next
// test that asks for one, instead of dropped; the databases left over are
// dropped when the tests end. A copy of the template costs the server some
// 0.3-0.7 s to create and 0.15 s to drop, emptying one some 0.02 s
// (docs/benchmarks.md, "make test on a fresh machine"). A database whose
// schema a test changed, or that a test filled past reuseMaxBytes, is
// dropped as before.
func Main(m *testing.M) {
	reuse.mu.Lock()
	reuse.on = true
	reuse.mu.Unlock()
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := reuse.dropAll(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "testdb: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	if pool, err := adminPool(); err == nil {
		pool.Close()
	}
	os.Exit(code)
}

// reuseMaxBytes is the size past which an ended test's database is dropped,
// not emptied: a filled ledger (internal/testbigledger) leaves statistics
// that would mislead the next test's planner, and files that emptying does
// not give back.
const reuseMaxBytes = 64 << 20

// reuse holds this process's emptied databases, by template.
var reuse = &freeList{free: map[string][]string{}, fingerprints: map[string]string{}}

// freeList is the free list of Main's reused databases.
type freeList struct {
	mu           sync.Mutex
	on           bool
	free         map[string][]string
	fingerprints map[string]string
}

func (p *freeList) enabled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.on
}

// take hands out an emptied copy of tmpl, if there is one.
func (p *freeList) take(tmpl string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on || tmpl == "" || len(p.free[tmpl]) == 0 {
		return "", false
	}
	names := p.free[tmpl]
	name := names[len(names)-1]
	p.free[tmpl] = names[:len(names)-1]
	return name, true
}

// learn records the fingerprint of tmpl from the database at dbURL, a
// copy no test has used yet, unless it is known.
func (p *freeList) learn(ctx context.Context, tmpl, dbURL string) error {
	p.mu.Lock()
	_, known := p.fingerprints[tmpl]
	p.mu.Unlock()
	if known {
		return nil
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("fingerprint the template: %w", err)
	}
	defer conn.Close(ctx)
	var fp string
	if err := conn.QueryRow(ctx, schemaFingerprint).Scan(&fp); err != nil {
		return fmt.Errorf("fingerprint the template: %w", err)
	}
	p.mu.Lock()
	p.fingerprints[tmpl] = fp
	p.mu.Unlock()
	return nil
}

// errChanged says that a test left a database other than its template
// made it, beyond its rows.
var errChanged = errors.New("its schema is no longer the template's")

// give empties the database name, a copy of tmpl whose test has ended,
// and puts it on the free list, over conn (keepOne's) or, when conn is
// nil, a connection of its own; it closes conn. It fails, and the caller
// drops the database, when the database cannot be emptied back to the
// template.
func (p *freeList) give(ctx context.Context, tmpl, name, dbURL string, conn *pgx.Conn) error {
	if conn == nil {
		var err error
		if conn, err = pgx.Connect(ctx, dbURL); err != nil {
			return err
		}
	}
	defer conn.Close(ctx)
	p.mu.Lock()
	want, known := p.fingerprints[tmpl]
	p.mu.Unlock()
	if !known {
		return errors.New("its template has no fingerprint")
	}
	if err := closeOthers(ctx, conn); err != nil {
		return err
	}
	var size int64
	var fp string
	if err := conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&size); err != nil {
		return err
	}
	if size > reuseMaxBytes {
		return fmt.Errorf("it holds %d MB", size>>20)
	}
	if err := conn.QueryRow(ctx, schemaFingerprint).Scan(&fp); err != nil {
		return err
	}
	if fp != want {
		return errChanged
	}
	if _, err := conn.Exec(ctx, emptyDatabase); err != nil {
		return fmt.Errorf("empty it: %w", err)
	}
	p.mu.Lock()
	p.free[tmpl] = append(p.free[tmpl], name)
	p.mu.Unlock()
	return nil
}

// keepOne takes a connection out of the ended test's pool for give, in
// the state of a new session (DISCARD ALL, and pgx forgets the statements
// it prepared): a new connection for the emptying was a session started
// and ended on the server for each ended test. It returns nil when the
// pool gives none (the test closed it) or the connection fails.
func keepOne(ctx context.Context, pool *pgxpool.Pool) *pgx.Conn {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil
	}
	conn := c.Hijack()
	if _, err := conn.Exec(ctx, "DISCARD ALL"); err != nil {
		_ = conn.Close(ctx)
		return nil
	}
	if err := conn.DeallocateAll(ctx); err != nil {
		_ = conn.Close(ctx)
		return nil
	}
	return conn
}

// closeOthers ends every other session on conn's database (a process a
// test started, a pool it did not close) and waits for them to be gone,
// so that nothing of the ended test writes into the next one's database.
func closeOthers(ctx context.Context, conn *pgx.Conn) error {
	for {
		var left int
		if err := conn.QueryRow(ctx, terminateOthers).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d sessions still connected: %w", left, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// dropAll drops the databases on the free list.
func (p *freeList) dropAll(ctx context.Context) error {
	p.mu.Lock()
	var names []string
	for _, free := range p.free {
		names = append(names, free...)
	}
	p.free = map[string][]string{}
	p.mu.Unlock()
	var errs []error
	for _, name := range names {
		errs = append(errs, drop(ctx, name))
	}
	return errors.Join(errs...)
}

// terminateOthers signals the database's other sessions to end and counts
// those still there.
const terminateOthers = `SELECT count(*)::int FROM (
    SELECT pg_terminate_backend(pid)
    FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
) signalled`

// emptyDatabase removes every row a test wrote and restarts the
// sequences, leaving the migrations' own records (schema_migrations,
// schema_functions), which the template holds too. It empties only the
// tables that hold a page on disk: a table that ever held a row, even one
// deleted or rolled back, has one, and a table that never did has none,
// so nothing a test wrote is left. It deletes rather than truncates: a
// TRUNCATE gives each table and index new files, and of a tenant's row it
// cascades to a dozen tables, 0.09 s of the server's work on an idle
// machine and 0.3 s under the suite, where a DELETE of a test's few rows
// is 0.01 s. The deletes run as a replica session, so that neither
// foreign keys nor triggers fire and the order of the tables does not
// matter; the dead rows they leave are a test's few. What the previous
// test's rows taught the planner (statistics, page and row counts) is
// put back as the template has it, or a test of a plan reads the
// previous test's data in it (a page of operations sorted 41 rows the
// ended test had left in the statistics). An id can be drawn
// without a page being written (an insert a constraint refuses draws its
// id first), so every sequence owned by a column that was drawn from is
// restarted too (docs/benchmarks.md, "make test on a fresh machine").
const emptyDatabase = `DO $$
DECLARE
    touched record;
    seq record;
BEGIN
    SET LOCAL session_replication_role = replica;
    FOR touched IN
    SELECT format('%I.%I', n.nspname, c.relname) AS name, c.oid
    FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind = 'r'
      AND n.nspname NOT IN ('pg_catalog', 'information_schema')
      AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%'
      AND c.relname NOT IN ('schema_migrations', 'schema_functions')
      AND pg_relation_size(c.oid) > 0
    LOOP
        EXECUTE 'DELETE FROM ' || touched.name;
        -- The planner's view of the table as the template has it: never
        -- analyzed, no pages, its indexes empty, and the activity
        -- counters autovacuum reads at zero.
        DELETE FROM pg_statistic
        WHERE starelid = touched.oid OR starelid IN (SELECT indexrelid FROM pg_index WHERE indrelid = touched.oid);
        UPDATE pg_class SET relpages = 0, reltuples = -1, relallvisible = 0 WHERE oid = touched.oid;
        UPDATE pg_class SET relpages = 1, reltuples = 0
        WHERE oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = touched.oid);
        PERFORM pg_stat_reset_single_table_counters(touched.oid);
    END LOOP;
    FOR seq IN
        SELECT format('%I.%I', sn.nspname, sc.relname) AS name
        FROM pg_sequences s
        JOIN pg_namespace sn ON sn.nspname = s.schemaname
        JOIN pg_class sc ON sc.relnamespace = sn.oid AND sc.relname = s.sequencename
        JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = sc.oid
            AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
        JOIN pg_class t ON t.oid = d.refobjid
        WHERE s.last_value IS NOT NULL
          AND t.relname NOT IN ('schema_migrations', 'schema_functions')
    LOOP
        EXECUTE 'ALTER SEQUENCE ' || seq.name || ' RESTART';
    END LOOP;
END
$$`

// schemaFingerprint digests what a migration or a function file makes
// (relations, columns, defaults, constraints, indexes, triggers,
// functions, types, extensions, the database's settings) and the
// migrations' records, so that a database a test altered is not handed
// to the next test as if it were the template.
const schemaFingerprint = `WITH user_ns AS (
    SELECT oid FROM pg_namespace
    WHERE nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND nspname NOT LIKE 'pg_temp%' AND nspname NOT LIKE 'pg_toast_temp%'
), items(x) AS (
    SELECT 'n ' || n.nspname FROM pg_namespace n WHERE n.oid IN (SELECT oid FROM user_ns)
    UNION ALL
    SELECT 'c ' || c.oid::regclass::text || ' ' || c.relkind::text || ' ' || c.relpersistence::text || ' ' || coalesce(array_to_string(c.reloptions, ','), '')
    FROM pg_class c WHERE c.relnamespace IN (SELECT oid FROM user_ns)
    UNION ALL
    SELECT 'a ' || a.attrelid::regclass::text || ' ' || a.attnum || ' ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
        || ' ' || a.attnotnull || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE c.relnamespace IN (SELECT oid FROM user_ns) AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'k ' || co.conrelid::regclass::text || ' ' || co.conname || ' ' || pg_get_constraintdef(co.oid)
    FROM pg_constraint co WHERE co.connamespace IN (SELECT oid FROM user_ns)
    UNION ALL
    SELECT 'i ' || pg_get_indexdef(i.indexrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace IN (SELECT oid FROM user_ns)
    UNION ALL
    SELECT 't ' || tg.tgrelid::regclass::text || ' ' || tg.tgname || ' ' || tg.tgenabled::text || ' ' || pg_get_triggerdef(tg.oid)
    FROM pg_trigger tg WHERE NOT tg.tgisinternal
    UNION ALL
    SELECT 'p ' || p.oid::regprocedure::text || ' ' || md5(coalesce(p.prosrc, '')) || ' ' || coalesce(array_to_string(p.proconfig, ','), '')
    FROM pg_proc p WHERE p.pronamespace IN (SELECT oid FROM user_ns)
    UNION ALL
    SELECT 'y ' || ty.oid::regtype::text || ' ' || coalesce((SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = ty.oid), '')
    FROM pg_type ty WHERE ty.typnamespace IN (SELECT oid FROM user_ns) AND ty.typtype IN ('e', 'd', 'c')
    UNION ALL
    SELECT 'e ' || extname || ' ' || extversion FROM pg_extension
    UNION ALL
    SELECT 's ' || coalesce(array_to_string(s.setconfig, ','), '')
    FROM pg_db_role_setting s JOIN pg_database db ON db.oid = s.setdatabase WHERE db.datname = current_database()
    UNION ALL
    SELECT 'm ' || version FROM schema_migrations
    UNION ALL
    SELECT 'f ' || name || ' ' || sha256 FROM schema_functions
)
SELECT md5(string_agg(x, E'\n' ORDER BY x)) FROM items`
