// Package schema holds actledger's database schema and applies it.
//
// The schema comes in two kinds of SQL file, both compiled into the binary:
//
//   - Numbered migrations (NNN_name.sql) hold the tables, indexes,
//     constraints and triggers (DDL). Each is applied once, in lexical
//     order, inside its own transaction, and recorded in schema_migrations.
//     A migration is never edited after it has shipped: change the schema
//     with a new file.
//   - Function files (functions/<name>.sql) hold the current definition of
//     each SQL function, one function per file named after it, written as
//     CREATE OR REPLACE FUNCTION. A function is added by adding its file
//     and changed by editing it, so the file's history is the function's
//     history. After the migrations, every file whose content is not the
//     one recorded in schema_functions (by SHA-256), or whose function is
//     missing, is applied, each in its own transaction, and recorded; an
//     unchanged file is not applied again. Migrations 001-017 created
//     their functions themselves (those files are history and stay as they
//     are); no later migration holds a function body.
//
// Several processes starting at once apply each step exactly once: an
// advisory lock serialises them, and a failed step rolls back whole.
//
// Function files are applied in dependency order: a file names the
// functions its body calls on a line "-- requires: a, b", and those are
// applied before it; files that require nothing of each other are applied
// in the order of their names. Postgres looks up what the body of a
// LANGUAGE sql function calls when the function is created, so there the
// order matters; a plpgsql body's calls are only looked up when it runs,
// but they are declared all the same. A numbered migration that needs the
// function of a file (a new trigger's function) declares it the same way,
// and that file is applied just before the migration.
//
// CREATE OR REPLACE cannot change a function's return type or the names of
// its arguments, and a changed list of argument types creates a second
// function beside the first. Such a change needs a numbered migration that
// drops the old function (DROP FUNCTION name(argument types)), in the same
// change as the edited file; Migrate refuses a file that would leave two
// functions of one name, and says so. To remove a function, drop it in a
// numbered migration and delete its file.
//
// A database that has numbered migrations this binary does not know was
// migrated by a newer binary: Migrate then leaves its functions alone, so
// that an older process starting during a rolling upgrade does not put
// back older function bodies. A change of function files alone is applied
// by whichever binary starts last; to keep older binaries from undoing it
// while they still start, ship it with a numbered migration (one holding
// only a comment that says why is enough).
package schema

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed *.sql functions/*.sql
var files embed.FS

// functionsDir is the folder of the function files within files.
const functionsDir = "functions"

// Migration is one numbered SQL file.
type Migration struct {
	Version string // the file name without ".sql", e.g. "001_initial"
	SQL     string
	// Requires names the function files applied before this migration,
	// from its "-- requires:" lines (e.g. the function of a trigger it
	// creates).
	Requires []string
}

// Function is one file of schema/functions: the current definition of the
// SQL function it is named after.
type Function struct {
	Name string // the file name without ".sql": the function's name
	SQL  string
	// Requires names the functions its body calls, from its
	// "-- requires:" lines; they are applied before it.
	Requires []string
}

// SHA256 is the hex SHA-256 of the file's content, as recorded in
// schema_functions when the file is applied.
func (f Function) SHA256() string {
	sum := sha256.Sum256([]byte(f.SQL))
	return hex.EncodeToString(sum[:])
}

// requiresLine is a line of a file that names functions it needs first.
var requiresLine = regexp.MustCompile(`(?m)^--\s*requires:(.*)$`)

// requires returns the names on sql's "-- requires:" lines.
func requires(sql string) []string {
	var names []string
	separator := func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }
	for _, m := range requiresLine.FindAllStringSubmatch(sql, -1) {
		names = append(names, strings.FieldsFunc(m[1], separator)...)
	}
	return names
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
		out = append(out, Migration{Version: strings.TrimSuffix(name, ".sql"), SQL: string(body), Requires: requires(string(body))})
	}
	return out, nil
}

// Functions returns every embedded function file in the order they are
// applied: each after the functions it requires, otherwise by name. A
// requirement that names no file, or requirements that go round in a
// circle, are an error.
func Functions() ([]Function, error) {
	names, err := fs.Glob(files, path.Join(functionsDir, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("list function files: %w", err)
	}
	list := make([]Function, 0, len(names))
	for _, name := range names {
		body, err := files.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read function file %s: %w", name, err)
		}
		list = append(list, Function{Name: strings.TrimSuffix(path.Base(name), ".sql"), SQL: string(body), Requires: requires(string(body))})
	}
	return orderFunctions(list)
}

// orderFunctions puts every function after the functions it requires,
// and otherwise in the order of their names, so that the order never
// depends on anything but the files.
func orderFunctions(list []Function) ([]Function, error) {
	byName := make(map[string]Function, len(list))
	names := make([]string, 0, len(list))
	for _, f := range list {
		byName[f.Name] = f
		names = append(names, f.Name)
	}
	sort.Strings(names)
	const (
		visiting = 1
		done     = 2
	)
	state := make(map[string]int, len(list))
	out := make([]Function, 0, len(list))
	// chain is the requirements that led to name, for the error of a circle.
	var visit func(name string, chain []string) error
	visit = func(name string, chain []string) error {
		switch state[name] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("order function files: requirements go round: %s", strings.Join(append(chain, name), " -> "))
		}
		state[name] = visiting
		f := byName[name]
		reqs := slices.Clone(f.Requires)
		sort.Strings(reqs)
		for _, r := range reqs {
			if _, ok := byName[r]; !ok {
				return fmt.Errorf("order function files: %s requires %s, which has no file %s/%s.sql", name, r, functionsDir, r)
			}
			if err := visit(r, append(chain, name)); err != nil {
				return err
			}
		}
		state[name] = done
		out = append(out, f)
		return nil
	}
	for _, name := range names {
		if err := visit(name, nil); err != nil {
			return nil, err
		}
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
	migrationVersionsSelect = `SELECT version FROM schema_migrations`
	migrationRecord         = `INSERT INTO schema_migrations (version) VALUES ($1)`

	// schema_functions holds, per function file, the SHA-256 of the
	// content last applied.
	functionsTableCreate = `CREATE TABLE IF NOT EXISTS schema_functions (
    name       text PRIMARY KEY,
    sha256     text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`
	functionHashesSelect = `SELECT name, sha256 FROM schema_functions`
	functionRecord       = `INSERT INTO schema_functions (name, sha256) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, applied_at = now()`
	// functionDefinitionsCount counts the functions named $1 in the
	// schema that unqualified CREATE FUNCTION creates into.
	functionDefinitionsCount = `SELECT count(*) FROM pg_proc
WHERE proname = $1 AND pronamespace = current_schema()::regnamespace`
)

// invalidFunctionDefinition is the SQLSTATE of CREATE OR REPLACE refusing
// to change a function's return type, argument names or defaults.
const invalidFunctionDefinition = "42P13"

// Migrate applies every migration that has not been applied yet, then
// every function file whose content is not the one last applied (or whose
// function is missing), and returns what it applied: migration versions
// ("017_claim_checks_provider") and function files
// ("functions/transition_operations"), in the order it applied them.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) ([]string, error) {
	migrations, err := Migrations()
	if err != nil {
		return nil, err
	}
	functions, err := Functions()
	if err != nil {
		return nil, err
	}
	return migrate(ctx, pool, logger, migrations, functions)
}

// migrator is one run of Migrate on one connection, holding the lock.
type migrator struct {
	conn     *pgxpool.Conn
	logger   *slog.Logger
	recorded map[string]string // function name -> SHA-256 last applied
	applied  []string
}

// migrate is Migrate with the migrations and function files given,
// functions in the order Functions returns them.
func migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger, migrations []Migration, functions []Function) ([]string, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
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
	if _, err := conn.Exec(ctx, functionsTableCreate); err != nil {
		return nil, fmt.Errorf("migrate: create schema_functions: %w", err)
	}
	rows, _ := conn.Query(ctx, migrationVersionsSelect)
	versions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	done := make(map[string]bool, len(versions))
	for _, v := range versions {
		done[v] = true
	}
	rows, _ = conn.Query(ctx, functionHashesSelect)
	type hashRow struct {
		Name   string
		SHA256 string
	}
	hashes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[hashRow])
	if err != nil {
		return nil, fmt.Errorf("migrate: read schema_functions: %w", err)
	}
	m := &migrator{conn: conn, logger: logger, recorded: make(map[string]string, len(hashes))}
	for _, h := range hashes {
		m.recorded[h.Name] = h.SHA256
	}

	for _, mig := range migrations {
		if done[mig.Version] {
			delete(done, mig.Version)
			continue
		}
		needed, err := closure(mig.Requires, functions)
		if err != nil {
			return m.applied, fmt.Errorf("migrate: %s: %w", mig.Version, err)
		}
		for _, f := range needed {
			if err := m.ensureFunction(ctx, f); err != nil {
				return m.applied, fmt.Errorf("migrate: before %s: %w", mig.Version, err)
			}
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, mig.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, migrationRecord, mig.Version)
			return err
		})
		if err != nil {
			return m.applied, fmt.Errorf("migrate: apply %s: %w", mig.Version, err)
		}
		logger.InfoContext(ctx, "applied migration", "version", mig.Version)
		m.applied = append(m.applied, mig.Version)
	}

	// What is left in done are migrations of a newer binary.
	if len(done) > 0 {
		newer := make([]string, 0, len(done))
		for v := range done {
			newer = append(newer, v)
		}
		sort.Strings(newer)
		logger.WarnContext(ctx, "the database was migrated by a newer binary: its functions are left as they are",
			"unknown_migrations", newer)
		return m.applied, nil
	}
	for _, f := range functions {
		if err := m.ensureFunction(ctx, f); err != nil {
			return m.applied, fmt.Errorf("migrate: %w", err)
		}
	}
	return m.applied, nil
}

// closure returns the functions names require, and the functions those
// require, in the order of functions (which puts requirements first).
func closure(names []string, functions []Function) ([]Function, error) {
	if len(names) == 0 {
		return nil, nil
	}
	byName := make(map[string]Function, len(functions))
	for _, f := range functions {
		byName[f.Name] = f
	}
	want := make(map[string]bool)
	var add func(name string) error
	add = func(name string) error {
		if want[name] {
			return nil
		}
		f, ok := byName[name]
		if !ok {
			return fmt.Errorf("requires function %s, which has no file %s/%s.sql", name, functionsDir, name)
		}
		want[name] = true
		for _, r := range f.Requires {
			if err := add(r); err != nil {
				return err
			}
		}
		return nil
	}
	for _, name := range names {
		if err := add(name); err != nil {
			return nil, err
		}
	}
	var out []Function
	for _, f := range functions {
		if want[f.Name] {
			out = append(out, f)
		}
	}
	return out, nil
}

// ensureFunction applies f unless the content last applied is f's and
// its function exists, and then records f's hash, in one transaction.
func (m *migrator) ensureFunction(ctx context.Context, f Function) error {
	hash := f.SHA256()
	if m.recorded[f.Name] == hash {
		var n int
		if err := m.conn.QueryRow(ctx, functionDefinitionsCount, f.Name).Scan(&n); err != nil {
			return fmt.Errorf("look up function %s: %w", f.Name, err)
		}
		if n > 0 {
			return nil
		}
	}
	err := pgx.BeginFunc(ctx, m.conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, f.SQL); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == invalidFunctionDefinition {
				return fmt.Errorf("%w (CREATE OR REPLACE cannot change a function's return type or argument names: "+
					"add a numbered migration that drops the function first)", err)
			}
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, functionDefinitionsCount, f.Name).Scan(&n); err != nil {
			return fmt.Errorf("count its definitions: %w", err)
		}
		switch {
		case n == 0:
			return fmt.Errorf("the file creates no function named %s", f.Name)
		case n > 1:
			return fmt.Errorf("%d functions are now named %s: a changed list of argument types creates a new function "+
				"beside the old one; add a numbered migration that drops the old one first", n, f.Name)
		}
		_, err := tx.Exec(ctx, functionRecord, f.Name, hash)
		return err
	})
	if err != nil {
		return fmt.Errorf("apply function file %s/%s.sql: %w", functionsDir, f.Name, err)
	}
	m.logger.InfoContext(ctx, "applied function", "name", f.Name, "sha256", hash)
	m.recorded[f.Name] = hash
	m.applied = append(m.applied, path.Join(functionsDir, f.Name))
	return nil
}
