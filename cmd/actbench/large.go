package main

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/bigledger"
	"github.com/actledger/actledger/internal/bounded"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/metrics"
	"github.com/actledger/actledger/relay"
	"github.com/actledger/actledger/schema"
)

// largePrefix is the stream prefix of every pipeline on the large ledger:
// the fill's dispatch messages not yet published name its subject, so the
// pipeline's relay publishes them as it publishes its own (onto a subject
// no dispatcher of the benchmark consumes).
const largePrefix = "ACTBENCHLARGE"

// largeFillProvider is the provider of the fill's operations
// (fill_chunk.sql).
const largeFillProvider = "mock"

// largeFillTable records, in the large database, the fill it holds; it
// is written last, so a database without it holds no complete fill.
const largeFillTable = `CREATE TABLE actbench_fill (
    version      text NOT NULL,
    operations   bigint NOT NULL,
    filled_at    timestamptz NOT NULL DEFAULT now(),
    fill_seconds double precision NOT NULL,
    vacuum_seconds double precision NOT NULL
)`

const largeFillRecord = `INSERT INTO actbench_fill (version, operations, fill_seconds, vacuum_seconds) VALUES ($1, $2, $3, $4)`

const largeFillRead = `SELECT version, operations, filled_at, fill_seconds, vacuum_seconds FROM actbench_fill`

// largeDatabaseName is the kept database of a fill of n operations.
func largeDatabaseName(n int64) string {
	switch {
	case n%1_000_000 == 0:
		return fmt.Sprintf("%slarge_%dm", databasePrefix, n/1_000_000)
	default:
		return fmt.Sprintf("%slarge_%dk", databasePrefix, n/1000)
	}
}

// fillInfo is what the large database holds and how it came to be.
type fillInfo struct {
	Database   string
	Operations int64
	Events     int64
	FilledAt   time.Time
	Fill       time.Duration // writing the rows
	Vacuum     time.Duration // VACUUM (ANALYZE) after the fill
	Reused     bool          // kept from an earlier run
	Version    string
	States     []stateCount // operations by state
}

// stateCount is how many operations are in one state.
type stateCount struct {
	Status string
	N      int64
}

// largeStates sums the counts the ledger keeps (per tenant and scope) by
// state.
const largeStates = `SELECT status, sum(n)::bigint AS n FROM operation_counts GROUP BY status ORDER BY n DESC`

// openLarge returns the kept large database of pl.LargeOperations
// operations, filling it first when it is missing, holds another fill
// (another size or fill version) or refill says so. A reused database is
// migrated to this binary's schema, so a new migration is measured on the
// same rows.
func openLarge(ctx context.Context, e *env, pl plan, refill bool) (*database, fillInfo, error) {
	name := cmp.Or(pl.LargeDatabase, largeDatabaseName(pl.LargeOperations))
	info := fillInfo{Database: name, Operations: pl.LargeOperations, Version: bigledger.FillVersion}
	admin, err := pgx.Connect(ctx, e.adminURL)
	if err != nil {
		return nil, info, fmt.Errorf("connect to %s (is Postgres running? set BENCH_DATABASE_URL): %w", e.adminURL, err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return nil, info, err
	}
	if exists && !refill {
		db, err := connectDatabase(ctx, e.adminURL, name)
		if err != nil {
			return nil, info, err
		}
		var version string
		var ops int64
		var fillS, vacS float64
		err = db.pool.QueryRow(ctx, largeFillRead).Scan(&version, &ops, &info.FilledAt, &fillS, &vacS)
		if err == nil && version == info.Version && ops == pl.LargeOperations {
			if _, err := schema.Migrate(ctx, db.pool, nil); err != nil {
				db.pool.Close()
				return nil, info, err
			}
			info.Reused, info.Fill, info.Vacuum = true, durationOf(fillS), durationOf(vacS)
			if err := readFill(ctx, db.pool, &info); err != nil {
				db.pool.Close()
				return nil, info, err
			}
			logf("large ledger: reusing %s (%s operations, fill %s of %s); --refill writes it again", name,
				thousands(float64(ops)), version, info.FilledAt.Format(time.DateTime))
			return db, info, nil
		}
		db.pool.Close()
		logf("large ledger: %s holds another fill (%v); writing it again", name, whyNotReused(err, version, ops))
	}
	if exists {
		if _, err := admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			return nil, info, fmt.Errorf("drop %s: %w", name, err)
		}
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return nil, info, fmt.Errorf("create database %s: %w", name, err)
	}
	db, err := connectDatabase(ctx, e.adminURL, name)
	if err != nil {
		return nil, info, err
	}
	ok := false
	defer func() {
		if !ok {
			db.pool.Close()
		}
	}()
	if _, err := schema.Migrate(ctx, db.pool, nil); err != nil {
		return nil, info, err
	}
	logf("large ledger: filling %s with %s operations, %d ranges at a time", name, thousands(float64(pl.LargeOperations)), pl.LargeWorkers)
	start := time.Now()
	err = bigledger.Fill(ctx, db.pool, bigledger.FillConfig{
		Operations: pl.LargeOperations, Range: pl.LargeRange, Workers: pl.LargeWorkers,
		Subject: broker.DispatchSubject(largePrefix, largeFillProvider),
		Progress: func(written, total int64) {
			took := time.Since(start)
			left := time.Duration(float64(took) * float64(total-written) / float64(written))
			logf("  %s of %s operations (%.0f%%) in %s, about %s left", thousands(float64(written)), thousands(float64(total)),
				100*float64(written)/float64(total), took.Round(time.Second), left.Round(time.Second))
		},
	})
	if err != nil {
		return nil, info, err
	}
	info.Fill = time.Since(start)
	logf("large ledger: filled in %s; VACUUM (ANALYZE), as autovacuum would have by now", info.Fill.Round(time.Second))
	start = time.Now()
	if _, err := db.pool.Exec(ctx, "VACUUM (ANALYZE)"); err != nil {
		return nil, info, fmt.Errorf("vacuum %s: %w", name, err)
	}
	info.Vacuum = time.Since(start)
	logf("large ledger: vacuumed and analyzed in %s", info.Vacuum.Round(time.Second))
	if _, err := db.pool.Exec(ctx, largeFillTable); err != nil {
		return nil, info, err
	}
	if _, err := db.pool.Exec(ctx, largeFillRecord, info.Version, info.Operations, info.Fill.Seconds(), info.Vacuum.Seconds()); err != nil {
		return nil, info, err
	}
	if err := db.pool.QueryRow(ctx, `SELECT filled_at FROM actbench_fill`).Scan(&info.FilledAt); err != nil {
		return nil, info, err
	}
	if err := readFill(ctx, db.pool, &info); err != nil {
		return nil, info, err
	}
	ok = true
	return db, info, nil
}

// durationOf is s seconds.
func durationOf(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// whyNotReused says why a kept database was not reused.
func whyNotReused(err error, version string, ops int64) string {
	if err != nil {
		return "no complete fill: " + err.Error()
	}
	return fmt.Sprintf("fill %s of %s operations", version, thousands(float64(ops)))
}

// readFill fills in what info says of the database's rows.
func readFill(ctx context.Context, pool *pgxpool.Pool, info *fillInfo) error {
	rows, _ := pool.Query(ctx, largeStates)
	var err error
	if info.States, err = pgx.CollectRows(rows, pgx.RowToStructByPos[stateCount]); err != nil {
		return err
	}
	info.Events, err = countEvents(ctx, pool)
	return err
}

// countEvents estimates the events from the planner's statistics: an
// exact count of tens of millions takes longer than it tells.
func countEvents(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var n float64
	err := pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE relname = 'operation_events'`).Scan(&n)
	return int64(n), err
}

// connectDatabase opens a pool to the existing database name, kept
// between runs (database.shared: never dropped).
func connectDatabase(ctx context.Context, adminURL, name string) (*database, error) {
	cfg, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		return nil, fmt.Errorf("BENCH_DATABASE_URL: %w", err)
	}
	cfg.ConnConfig.Database = name
	cfg.MaxConns = poolMaxConns
	schema.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", name, err)
	}
	return &database{name: name, admin: adminURL, pool: pool, shared: true}, nil
}

// largeCleanup removes, in one transaction, every row a pipeline added
// to the large ledger: the operations of every tenant the fill did not
// write (the pipelines' own), their events and dispatch messages, their
// approvals and tokens, and the count deltas their transitions appended
// (on this ledger only the pipelines' operations move, so every delta is
// theirs; the fill wrote its counts folded). The events are append-only
// by trigger, so the deletes run with session_replication_role = replica,
// as the fill's inserts do. What stays is the fill: every run measures the
// same ledger, and the database does not grow from run to run.
//
//go:embed large_cleanup.sql
var largeCleanup string

// cleanLarge runs largeCleanup and then VACUUM of the tables it deleted
// from (autovacuum may be off, as on the machines of docs/benchmarks.md,
// and the dead rows would otherwise stay for the next run), and returns
// the operations deleted and how long the VACUUM took.
func cleanLarge(ctx context.Context, db *database, filledAt time.Time) (int64, time.Duration, error) {
	ctx = context.WithoutCancel(ctx)
	var deleted int64
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('actbench.filled_at', $1, true)`, filledAt.Format(time.RFC3339Nano)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, largeCleanup, pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM actbench_deleted`).Scan(&deleted)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("clean the large ledger: %w", err)
	}
	start := time.Now()
	if _, err := db.pool.Exec(ctx, `VACUUM (ANALYZE) operations, operation_events, outbox, approvals, api_tokens, operation_count_deltas`); err != nil {
		return deleted, 0, fmt.Errorf("vacuum the large ledger: %w", err)
	}
	return deleted, time.Since(start), nil
}

// tableSize is the size of one table of the large ledger.
type tableSize struct {
	Table         string
	Rows          int64
	Heap, Indexes int64 // bytes
}

const largeTableSizes = `SELECT c.relname, c.reltuples::bigint, pg_table_size(c.oid), pg_indexes_size(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname = ANY ($1)
ORDER BY pg_total_relation_size(c.oid) DESC`

// indexSize is one index of operations and its size.
type indexSize struct {
	Index string
	Bytes int64
}

const largeIndexSizes = `SELECT i.relname, pg_relation_size(i.oid)
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
WHERE t.relname = 'operations' ORDER BY pg_relation_size(i.oid) DESC`

func largeSizes(ctx context.Context, pool *pgxpool.Pool) ([]tableSize, []indexSize, error) {
	rows, _ := pool.Query(ctx, largeTableSizes, append(bigledger.Large, "approvals", "stale_results"))
	tables, err := pgx.CollectRows(rows, pgx.RowToStructByPos[tableSize])
	if err != nil {
		return nil, nil, err
	}
	rows, _ = pool.Query(ctx, largeIndexSizes)
	indexes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[indexSize])
	return tables, indexes, err
}

// tableStats are the update and dead-row counters of operations over a
// stage on the large ledger.
type tableStats struct {
	Updates, HOT, Dead int64
}

const operationsStats = `SELECT n_tup_upd, n_tup_hot_upd, n_dead_tup FROM pg_stat_user_tables WHERE relname = 'operations'`

func readStats(ctx context.Context, pool *pgxpool.Pool) (tableStats, error) {
	var s tableStats
	err := pool.QueryRow(ctx, operationsStats).Scan(&s.Updates, &s.HOT, &s.Dead)
	return s, err
}

// largeQueries are every statement that must stay bounded, from the
// packages that run them, with the large ledger's rows as parameters.
func largeQueries(ctx context.Context, pool *pgxpool.Pool) ([]bounded.Query, error) {
	f, err := bigledger.Pick(ctx, pool)
	if err != nil {
		return nil, err
	}
	qs := ledger.BoundedQueries(f)
	qs = append(qs, metrics.BoundedQueries()...)
	return append(qs, relay.BoundedQueries()...), nil
}

// largeResult is the large stage: the fill, the sizes, the same stages
// on an empty and on the large ledger, repetition by repetition, and the
// bounded queries timed on it.
type largeResult struct {
	Fill             fillInfo
	Tables           []tableSize
	Indexes          []indexSize
	EmptyAPI, BigAPI [][]apiResult
	EmptyE2E, BigE2E []e2eResult
	Stats            []tableStats // operations' counters over each large e2e repetition
	Queries          []bigledger.Result
	Cleaned          int64         // operations the stage added and deleted
	CleanVacuum      time.Duration // the VACUUM after the last clean-up
}

// benchLarge runs the large stage: it opens (or fills) the large ledger,
// times the bounded queries on it, then runs the API and end-to-end
// stages on an empty ledger and on the large one, alternately, each
// pl.Reps times, and cleans what they added.
func benchLarge(ctx context.Context, e *env, pl plan, refill bool, res *results) error {
	db, info, err := openLarge(ctx, e, pl, refill)
	if err != nil {
		return err
	}
	defer db.pool.Close()
	lr := &largeResult{Fill: info}
	res.Large = lr
	// A run stopped half way left its rows: clean them first.
	if n, took, err := cleanLarge(ctx, db, info.FilledAt); err != nil {
		return err
	} else if n > 0 {
		logf("large ledger: removed %s operations an earlier run left (VACUUM %s)", thousands(float64(n)), took.Round(time.Millisecond))
	}
	if lr.Tables, lr.Indexes, err = largeSizes(ctx, db.pool); err != nil {
		return fmt.Errorf("table sizes: %w", err)
	}
	for _, t := range lr.Tables {
		logf("  %-18s %12s rows, heap %s, indexes %s", t.Table, thousands(float64(t.Rows)), mib(t.Heap), mib(t.Indexes))
	}
	qs, err := largeQueries(ctx, db.pool)
	if err != nil {
		return err
	}
	logf("large ledger: timing %d bounded queries (EXPLAIN ANALYZE, second run)", len(qs))
	if lr.Queries, err = bigledger.Check(ctx, db.pool, qs...); err != nil {
		return err
	}
	for _, q := range lr.Queries {
		if len(q.Problems) > 0 {
			logf("  warning: %s is not bounded: %v", q.Name, q.Problems)
		}
	}
	large := *e
	large.large = db
	clean := func() error {
		n, took, err := cleanLarge(ctx, db, info.FilledAt)
		lr.Cleaned += n
		lr.CleanVacuum = took
		return err
	}
	err = repeat(ctx, pl, "API enqueue, empty ledger then large", func() error {
		r, err := apiEnqueue(ctx, e, pl)
		if err != nil {
			return err
		}
		lr.EmptyAPI = append(lr.EmptyAPI, r)
		logf("  on %s:", info.Database)
		if r, err = apiEnqueue(ctx, &large, pl); err != nil {
			return err
		}
		lr.BigAPI = append(lr.BigAPI, r)
		return clean()
	})
	if err != nil {
		return err
	}
	return repeat(ctx, pl, "end to end, empty ledger then large", func() error {
		r, err := endToEnd(ctx, e, pl)
		if err != nil {
			return err
		}
		lr.EmptyE2E = append(lr.EmptyE2E, r)
		logf("  on %s:", info.Database)
		before, err := readStats(ctx, db.pool)
		if err != nil {
			return err
		}
		if r, err = endToEnd(ctx, &large, pl); err != nil {
			return err
		}
		lr.BigE2E = append(lr.BigE2E, r)
		after, err := readStats(ctx, db.pool)
		if err != nil {
			return err
		}
		s := tableStats{Updates: after.Updates - before.Updates, HOT: after.HOT - before.HOT, Dead: after.Dead}
		lr.Stats = append(lr.Stats, s)
		logf("  operations: %s updates, %s HOT (%.0f%%), %s dead rows before the clean-up", thousands(float64(s.Updates)),
			thousands(float64(s.HOT)), 100*float64(s.HOT)/float64(max(s.Updates, 1)), thousands(float64(s.Dead)))
		if err := clean(); err != nil {
			return err
		}
		logf("  cleaned: VACUUM after the clean-up %s", lr.CleanVacuum.Round(time.Millisecond))
		return nil
	})
}

func mib(b int64) string { return fmt.Sprintf("%s MiB", thousands(float64(b)/(1<<20))) }
