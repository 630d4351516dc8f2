package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/schema"
)

// databasePrefix begins the name of every scratch database the benchmark
// creates; the CPU meter counts the Postgres backends of those databases.
const databasePrefix = "actbench_"

// poolMaxConns is the pool size `actledger serve` gives a pool configured
// smaller than 16 (cmd/actledger/db.go): the benchmark runs the pipeline as
// it is shipped.
const poolMaxConns = 32

// uniqueName is prefix followed by 12 random lowercase characters: a name
// for a database or a stream prefix no other run uses.
func uniqueName(prefix string) string {
	return prefix + strings.ToLower(rand.Text()[:12])
}

// database is a scratch database on the server: created by the benchmark
// and dropped by it.
type database struct {
	name  string
	admin string // URL of the maintenance database
	pool  *pgxpool.Pool
	// shared is a database kept between runs (the large ledger): drop
	// leaves it.
	shared bool
}

// createDatabase creates an empty database named after prefix and returns a
// pool of maxConns connections to it; migrate applies actledger's schema.
func createDatabase(ctx context.Context, adminURL, prefix string, maxConns int32, migrate bool) (*database, error) {
	name := uniqueName(prefix)
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect to %s (is Postgres running? set BENCH_DATABASE_URL): %w", adminURL, err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	db := &database{name: name, admin: adminURL}
	cfg, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		db.drop(ctx)
		return nil, fmt.Errorf("BENCH_DATABASE_URL: %w", err)
	}
	cfg.ConnConfig.Database = name
	cfg.MaxConns = maxConns
	schema.ConfigurePool(cfg)
	if db.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		db.drop(ctx)
		return nil, fmt.Errorf("connect to %s: %w", name, err)
	}
	if migrate {
		if _, err := schema.Migrate(ctx, db.pool, nil); err != nil {
			db.drop(ctx)
			return nil, err
		}
	}
	return db, nil
}

// connect opens one more connection to the database, outside the pool (for
// watchers that must not take the pipeline's connections).
func (db *database) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg := db.pool.Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", db.name, err)
	}
	// As on the pool (schema.ConfigurePool, whose hook a copied ConnConfig
	// does not carry): the ledger watcher sends the ids of every pending
	// operation each poll, and without the uuid codec each id went through
	// text and back (docs/benchmarks.md, "What changed, and what each
	// change bought": the benchmark's ledger watcher).
	schema.RegisterTypes(conn.TypeMap())
	return conn, nil
}

// drop closes the pool and drops the database, whatever ctx says; a
// shared database's pool belongs to its opener and stays open.
func (db *database) drop(ctx context.Context) {
	if db.shared {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if db.pool != nil {
		db.pool.Close()
	}
	admin, err := pgx.Connect(ctx, db.admin)
	if err != nil {
		logf("warning: cannot drop database %s: %v", db.name, err)
		return
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db.name}.Sanitize()+" WITH (FORCE)"); err != nil {
		logf("warning: cannot drop database %s: %v", db.name, err)
	}
}
