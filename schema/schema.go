// Package schema holds actledger's database migrations and applies them.
//
// Migrations are plain, numbered SQL files (NNN_name.sql) compiled into the
// binary. Each is applied in lexical order inside its own transaction and
// recorded in schema_migrations, so a half-applied migration never exists and
// several processes starting at once apply each migration exactly once (an
// advisory lock serialises them). A migration is never edited after it has
// shipped: change the schema with a new file.
package schema

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed *.sql
var files embed.FS

// Migration is one numbered SQL file.
type Migration struct {
	Version string // the file name without ".sql", e.g. "001_initial"
	SQL     string
}

// Migrations returns every embedded migration in the order it is applied.
func Migrations() ([]Migration, error) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	sort.Strings(names)
	out := make([]Migration, 0, len(names))
	for _, name := range names {
		body, err := files.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		out = append(out, Migration{Version: strings.TrimSuffix(name, ".sql"), SQL: string(body)})
	}
	return out, nil
}

// migrateLockID is the advisory lock key that serialises concurrent
// migrators ("actledger" in ASCII, truncated to 8 bytes).
const migrateLockID = 0x6163746c65646765

const (
	migrationsTableCreate = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)`
	migrationApplied = `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`
	migrationRecord  = `INSERT INTO schema_migrations (version) VALUES ($1)`
)

// Migrate applies every migration that has not been applied yet and returns
// the versions it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) ([]string, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	migrations, err := Migrations()
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: acquire connection: %w", err)
	}
	defer conn.Release()

	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrateLockID)); err != nil {
		return nil, fmt.Errorf("migrate: take lock: %w", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrateLockID))
	}()

	if _, err := conn.Exec(ctx, migrationsTableCreate); err != nil {
		return nil, fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	var applied []string
	for _, m := range migrations {
		var done bool
		if err := conn.QueryRow(ctx, migrationApplied, m.Version).Scan(&done); err != nil {
			return applied, fmt.Errorf("migrate: check %s: %w", m.Version, err)
		}
		if done {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, migrationRecord, m.Version)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("migrate: apply %s: %w", m.Version, err)
		}
		logger.InfoContext(ctx, "applied migration", "version", m.Version)
		applied = append(applied, m.Version)
	}
	return applied, nil
}
