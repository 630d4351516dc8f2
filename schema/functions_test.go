package schema_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/schema"
)

// lastMigrationWithFunctions is the last numbered migration that created
// functions itself; every function body since lives in schema/functions.
const lastMigrationWithFunctions = "017_claim_checks_provider"

const (
	// functionDefinitionsSelect lists the functions of the public schema
	// with their definitions as Postgres prints them back.
	functionDefinitionsSelect = `SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace ORDER BY p.proname, p.oid`
	// triggerFunctionsSelect lists every trigger with the function it calls.
	triggerFunctionsSelect = `SELECT tgrelid::regclass::text || '.' || tgname, tgfoid::regprocedure::text
FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1`
	functionHashesSelect = `SELECT name, sha256 FROM schema_functions ORDER BY name`
	functionSourceSelect = `SELECT prosrc FROM pg_proc WHERE proname = $1 AND pronamespace = 'public'::regnamespace`
	// oldMigrationsTableCreate and oldMigrationRecord are the bookkeeping
	// of migrations before function files existed.
	oldMigrationsTableCreate = `CREATE TABLE schema_migrations (
    version    text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)`
	oldMigrationRecord = `INSERT INTO schema_migrations (version) VALUES ($1)`
)

// embedded returns the migrations and function files of the binary.
func embedded(t *testing.T) ([]schema.Migration, []schema.Function) {
	t.Helper()
	migrations, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	functions, err := schema.Functions()
	if err != nil {
		t.Fatal(err)
	}
	return migrations, functions
}

// steps is what Migrate applies to an empty database, in order: each
// migration, after the function files it requires, then every other
// function file.
func steps(migrations []schema.Migration, functions []schema.Function) []string {
	done := map[string]bool{}
	var out []string
	for _, m := range migrations {
		for _, name := range m.Requires {
			if !done[name] {
				out, done[name] = append(out, "functions/"+name), true
			}
		}
		out = append(out, m.Version)
	}
	for _, f := range functions {
		if !done[f.Name] {
			out = append(out, "functions/"+f.Name)
		}
	}
	return out
}

// definitions returns each function of the public schema by name, failing
// t if one name has several definitions.
func definitions(t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) map[string]string {
	t.Helper()
	rows, _ := q.Query(context.Background(), functionDefinitionsSelect)
	type def struct{ Name, SQL string }
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[def])
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(list))
	for _, d := range list {
		if _, dup := out[d.Name]; dup {
			t.Errorf("function %s has more than one definition", d.Name)
		}
		out[d.Name] = d.SQL
	}
	return out
}

// pairs returns the rows of query, two text columns each, as a map.
func pairs(t *testing.T, pool *pgxpool.Pool, query string) map[string]string {
	t.Helper()
	rows, _ := pool.Query(context.Background(), query)
	type pair struct{ K, V string }
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[pair])
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(list))
	for _, p := range list {
		out[p.K] = p.V
	}
	return out
}

// source returns the body of the function name.
func source(t *testing.T, pool *pgxpool.Pool, name string) string {
	t.Helper()
	var src string
	if err := pool.QueryRow(context.Background(), functionSourceSelect, name).Scan(&src); err != nil {
		t.Fatalf("source of %s: %v", name, err)
	}
	return src
}

// replaced returns functions with f's SQL changed by old -> new.
func replaced(t *testing.T, functions []schema.Function, name, old, new string) []schema.Function {
	t.Helper()
	out := slices.Clone(functions)
	for i, f := range out {
		if f.Name == name {
			if !strings.Contains(f.SQL, old) {
				t.Fatalf("%s.sql has no %q", name, old)
			}
			out[i].SQL = strings.Replace(f.SQL, old, new, 1)
			return out
		}
	}
	t.Fatalf("no function file %s", name)
	return nil
}

// migrateWith runs MigrateWith, failing t on an error.
func migrateWith(t *testing.T, pool *pgxpool.Pool, migrations []schema.Migration, functions []schema.Function) []string {
	t.Helper()
	applied, err := schema.MigrateWith(context.Background(), pool, nil, migrations, functions)
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return applied
}

// TestEveryFunctionOfAMigratedDatabaseIsItsFileApplied: a migrated
// database has exactly the functions of schema/functions, each with the
// hash of its file recorded, and each is what its file alone creates. The
// functions are moved aside and the files applied in Migrate's order into
// a database with none of them (Postgres checks LANGUAGE sql bodies at
// creation, so this also proves the order is enough), then every
// definition is compared with the migrated one.
func TestEveryFunctionOfAMigratedDatabaseIsItsFileApplied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	_, functions := embedded(t)

	wantHashes := make(map[string]string, len(functions))
	for _, f := range functions {
		wantHashes[f.Name] = f.SHA256()
	}
	if got := pairs(t, pool, functionHashesSelect); !maps.Equal(got, wantHashes) {
		t.Errorf("schema_functions = %v, want the files' hashes %v", got, wantHashes)
	}

	migrated := definitions(t, pool)
	if got, want := slices.Sorted(maps.Keys(migrated)), slices.Sorted(maps.Keys(wantHashes)); !slices.Equal(got, want) {
		t.Fatalf("functions of a migrated database %v, want one per file %v", got, want)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL check_function_bodies = on`); err != nil {
		t.Fatal(err)
	}
	for name := range migrated {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`DO $$ BEGIN EXECUTE format('ALTER FUNCTION %%s RENAME TO %%I',
            (SELECT oid::regprocedure FROM pg_proc WHERE proname = %s AND pronamespace = 'public'::regnamespace),
            %s); END $$`, quote(name), quote(name+"_migrated"))); err != nil {
			t.Fatalf("move %s aside: %v", name, err)
		}
	}
	for _, f := range functions {
		if _, err := tx.Exec(ctx, f.SQL); err != nil {
			t.Fatalf("apply %s.sql after the ones before it: %v", f.Name, err)
		}
	}
	after := definitions(t, tx)
	for name := range migrated {
		fromFile := after[name]
		// The migrated one, under its own name again.
		fromMigrate := strings.Replace(after[name+"_migrated"], "FUNCTION public."+name+"_migrated(", "FUNCTION public."+name+"(", 1)
		if fromMigrate != fromFile {
			t.Errorf("%s in a migrated database:\n%s\nwant what %s.sql creates:\n%s", name, fromMigrate, name, fromFile)
		}
	}
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// TestChangedFunctionFileIsAppliedAgainAndUnchangedOnesAreNot: Migrate
// applies again exactly the file whose content changed (and records its
// new hash), then nothing on the next run; going back to the old content
// is a change too.
func TestChangedFunctionFileIsAppliedAgainAndUnchangedOnesAreNot(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	migrations, functions := embedded(t)

	if applied := migrateWith(t, pool, migrations, functions); len(applied) != 0 {
		t.Fatalf("a migrated database: applied %v, want nothing", applied)
	}
	before := pairs(t, pool, `SELECT name, applied_at::text FROM schema_functions`)

	changed := replaced(t, functions, "operation_lapse", "    SELECT CASE", "    -- changed\n    SELECT CASE")
	if got, want := migrateWith(t, pool, migrations, changed), []string{"functions/operation_lapse"}; !slices.Equal(got, want) {
		t.Fatalf("after a change of operation_lapse.sql: applied %v, want %v", got, want)
	}
	if src := source(t, pool, "operation_lapse"); !strings.Contains(src, "-- changed") {
		t.Errorf("operation_lapse is not the changed file's: %s", src)
	}
	hashes := pairs(t, pool, functionHashesSelect)
	after := pairs(t, pool, `SELECT name, applied_at::text FROM schema_functions`)
	for _, f := range changed {
		if hashes[f.Name] != f.SHA256() {
			t.Errorf("%s: recorded %s, want %s", f.Name, hashes[f.Name], f.SHA256())
		}
		if f.Name != "operation_lapse" && after[f.Name] != before[f.Name] {
			t.Errorf("%s was applied again (applied_at %s, was %s) though its file did not change", f.Name, after[f.Name], before[f.Name])
		}
	}
	if applied := migrateWith(t, pool, migrations, changed); len(applied) != 0 {
		t.Errorf("the next run: applied %v, want nothing", applied)
	}

	if got, want := migrateWith(t, pool, migrations, functions), []string{"functions/operation_lapse"}; !slices.Equal(got, want) {
		t.Errorf("back to the original operation_lapse.sql: applied %v, want %v", got, want)
	}
	if src := source(t, pool, "operation_lapse"); strings.Contains(src, "-- changed") {
		t.Errorf("operation_lapse is still the changed file's: %s", src)
	}
}

// TestFunctionDroppedOutsideItsFileIsCreatedAgain: a recorded hash is not
// enough; a function that is missing (a migration or a person dropped it)
// is created again from its unchanged file.
func TestFunctionDroppedOutsideItsFileIsCreatedAgain(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	migrations, functions := embedded(t)
	if _, err := pool.Exec(context.Background(), `DROP FUNCTION operation_lapse(approvals, api_tokens, timestamptz, text, text)`); err != nil {
		t.Fatal(err)
	}
	if got, want := migrateWith(t, pool, migrations, functions), []string{"functions/operation_lapse"}; !slices.Equal(got, want) {
		t.Errorf("applied %v, want %v", got, want)
	}
	if len(source(t, pool, "operation_lapse")) == 0 {
		t.Error("operation_lapse is empty")
	}
}

// TestDatabaseMigratedBeforeFunctionFilesMigratesCleanly: a database that
// the code before function files migrated (migrations up to 017 applied
// and recorded, their functions in place, no schema_functions) migrates
// with the current code: it applies the later migrations and every
// function file, and ends with the functions and triggers of a freshly
// migrated database; the next run does nothing.
func TestDatabaseMigratedBeforeFunctionFilesMigratesCleanly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old := testdb.NewEmpty(t)
	migrations, functions := embedded(t)

	if _, err := old.Exec(ctx, oldMigrationsTableCreate); err != nil {
		t.Fatal(err)
	}
	var later []schema.Migration
	for _, m := range migrations {
		if m.Version > lastMigrationWithFunctions {
			later = append(later, m)
			continue
		}
		err := pgx.BeginFunc(ctx, old, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, oldMigrationRecord, m.Version)
			return err
		})
		if err != nil {
			t.Fatalf("apply %s the old way: %v", m.Version, err)
		}
	}
	triggersBefore := pairs(t, old, triggerFunctionsSelect)

	applied, err := schema.Migrate(ctx, old, nil)
	if err != nil {
		t.Fatalf("migrate a database of the old code: %v", err)
	}
	if want := steps(later, functions); !slices.Equal(applied, want) {
		t.Errorf("applied %v, want %v", applied, want)
	}

	fresh := testdb.New(t)
	if got, want := definitions(t, old), definitions(t, fresh); !maps.Equal(got, want) {
		for name := range want {
			if got[name] != want[name] {
				t.Errorf("%s after the upgrade:\n%s\nwant, as in a fresh database:\n%s", name, got[name], want[name])
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%s after the upgrade: a fresh database has no such function", name)
			}
		}
	}
	if len(later) == 0 {
		// No migration changed a trigger since: each still calls the
		// function it called, now defined by its file.
		if got := pairs(t, old, triggerFunctionsSelect); !maps.Equal(got, triggersBefore) {
			t.Errorf("triggers after the upgrade %v, want as before %v", got, triggersBefore)
		}
	}
	if got, want := pairs(t, old, triggerFunctionsSelect), pairs(t, fresh, triggerFunctionsSelect); !maps.Equal(got, want) {
		t.Errorf("triggers after the upgrade %v, want as in a fresh database %v", got, want)
	}
	if applied, err := schema.Migrate(ctx, old, nil); err != nil || len(applied) != 0 {
		t.Errorf("the next run: applied %v, %v; want nothing", applied, err)
	}
}

// TestMigrateRefusesAFunctionFileThatNeedsTheOldFunctionDropped: a file
// that changes its function's argument names (CREATE OR REPLACE refuses)
// or argument types (CREATE OR REPLACE would add a second function) fails
// with an error that says to drop the function in a numbered migration,
// and changes nothing; with that migration, it applies.
func TestMigrateRefusesAFunctionFileThatNeedsTheOldFunctionDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	migrations, functions := embedded(t)
	before := definitions(t, pool)

	for _, c := range []struct {
		name     string
		old, new string
		wantErr  string
	}{
		{"argument renamed", "p_at timestamptz", "p_time timestamptz", "add a numbered migration that drops the function first"},
		{"argument added", "p_environment text)", "p_environment text, p_extra text)", "add a numbered migration that drops the old one first"},
		{"return type changed", "RETURNS text LANGUAGE sql", "RETURNS varchar LANGUAGE sql", "add a numbered migration that drops the function first"},
	} {
		changed := replaced(t, functions, "operation_lapse", c.old, c.new)
		applied, err := schema.MigrateWith(ctx, pool, nil, migrations, changed)
		if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "operation_lapse") {
			t.Errorf("%s: err = %v, want one naming operation_lapse that says %q", c.name, err, c.wantErr)
		}
		if len(applied) != 0 {
			t.Errorf("%s: applied %v, want nothing", c.name, applied)
		}
		if got := definitions(t, pool); !maps.Equal(got, before) {
			t.Errorf("%s: the functions changed", c.name)
		}
	}

	changed := replaced(t, functions, "operation_lapse", "p_environment text)", "p_environment text, p_extra text)")
	drop := schema.Migration{Version: "999_operation_lapse_extra",
		SQL: `DROP FUNCTION operation_lapse(approvals, api_tokens, timestamptz, text, text)`}
	got := migrateWith(t, pool, append(slices.Clone(migrations), drop), changed)
	if want := []string{drop.Version, "functions/operation_lapse"}; !slices.Equal(got, want) {
		t.Errorf("with the migration that drops it: applied %v, want %v", got, want)
	}
}

// TestMigrateLeavesTheFunctionsOfANewerDatabaseAlone: a database with a
// migration this binary does not know was migrated by a newer binary, so
// an older process starting during an upgrade does not put back its older
// function bodies.
func TestMigrateLeavesTheFunctionsOfANewerDatabaseAlone(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	migrations, functions := embedded(t)
	if _, err := pool.Exec(context.Background(), `INSERT INTO schema_migrations (version) VALUES ('999_newer')`); err != nil {
		t.Fatal(err)
	}
	changed := replaced(t, functions, "operation_lapse", "    SELECT CASE", "    -- older\n    SELECT CASE")
	if applied := migrateWith(t, pool, migrations, changed); len(applied) != 0 {
		t.Errorf("applied %v, want nothing", applied)
	}
	if src := source(t, pool, "operation_lapse"); strings.Contains(src, "-- older") {
		t.Errorf("operation_lapse was replaced: %s", src)
	}
}

// TestMigrationRequiringAFunctionFileGetsItFirst: a numbered migration
// whose trigger calls a function of a file ("-- requires:") runs after
// that file is applied, and the file is not applied a second time after
// the migrations.
func TestMigrationRequiringAFunctionFileGetsItFirst(t *testing.T) {
	t.Parallel()
	pool := testdb.NewEmpty(t)
	migrations, functions := embedded(t)
	touch := schema.Function{Name: "tenants_touch", SQL: `-- tenants_touch: a test's trigger function.
CREATE OR REPLACE FUNCTION tenants_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN NEW;
END;
$$;`}
	trigger := schema.Migration{Version: "999_tenants_touch", Requires: []string{"tenants_touch"},
		SQL: `-- requires: tenants_touch
CREATE TRIGGER tenants_touch BEFORE UPDATE ON tenants FOR EACH ROW EXECUTE FUNCTION tenants_touch();`}
	all, err := schema.OrderFunctions(append(slices.Clone(functions), touch))
	if err != nil {
		t.Fatal(err)
	}
	got := migrateWith(t, pool, append(slices.Clone(migrations), trigger), all)
	want := steps(append(slices.Clone(migrations), trigger), all)
	if i := slices.Index(want, trigger.Version); i < 1 || want[i-1] != "functions/tenants_touch" {
		t.Fatalf("the expected steps %v do not apply tenants_touch just before its migration", want)
	}
	if !slices.Equal(got, want) {
		t.Errorf("applied %v, want %v", got, want)
	}
}

// TestConcurrentMigratesApplyEachStepOnce: processes starting at once on an
// empty database share the work: every migration and function file is
// applied by exactly one of them.
func TestConcurrentMigratesApplyEachStepOnce(t *testing.T) {
	t.Parallel()
	pool := testdb.NewEmpty(t)
	migrations, functions := embedded(t)
	var (
		mu  sync.Mutex
		all []string
		wg  sync.WaitGroup
	)
	for range 3 {
		wg.Go(func() {
			applied, err := schema.Migrate(context.Background(), pool, nil)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			all = append(all, applied...)
			mu.Unlock()
		})
	}
	wg.Wait()
	want := steps(migrations, functions)
	slices.Sort(all)
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Errorf("applied together %v, want each step once %v", all, want)
	}
}

// sqlComment is a line comment of SQL.
var sqlComment = regexp.MustCompile(`--[^\n]*`)

// functionDefinition is a statement that creates or changes a function.
var functionDefinition = regexp.MustCompile(`(?i)\b(?:CREATE\s+(?:OR\s+REPLACE\s+)?|ALTER\s+)FUNCTION\b`)

// TestMigrationsAfter017HoldNoFunctionBodies: since function files exist,
// a numbered migration keeps to DDL; it may drop a function (to change its
// signature or remove it) but never creates or alters one.
func TestMigrationsAfter017HoldNoFunctionBodies(t *testing.T) {
	t.Parallel()
	for _, sql := range []string{"CREATE FUNCTION f()", "create or replace\n  function f()", "ALTER FUNCTION f() SET x = y"} {
		if !functionDefinition.MatchString(sql) {
			t.Fatalf("the check misses %q", sql)
		}
	}
	migrations, _ := embedded(t)
	for _, m := range migrations {
		if m.Version <= lastMigrationWithFunctions {
			continue
		}
		if loc := functionDefinition.FindStringIndex(sqlComment.ReplaceAllString(m.SQL, "")); loc != nil {
			t.Errorf("%s.sql creates or alters a function; its body belongs in schema/functions/<name>.sql", m.Version)
		}
	}
}

// TestEachFunctionFileDefinesTheFunctionItIsNamedAfter: a file holds one
// CREATE OR REPLACE FUNCTION, of the function it is named after, so the
// file's history is that function's and applying it twice is harmless.
func TestEachFunctionFileDefinesTheFunctionItIsNamedAfter(t *testing.T) {
	t.Parallel()
	_, functions := embedded(t)
	if len(functions) == 0 {
		t.Fatal("no function files")
	}
	defines := regexp.MustCompile(`(?i)\bCREATE\s+OR\s+REPLACE\s+FUNCTION\s+([a-z_][a-z0-9_]*)\s*\(`)
	for _, f := range functions {
		code := sqlComment.ReplaceAllString(f.SQL, "")
		all := functionDefinition.FindAllString(code, -1)
		names := defines.FindAllStringSubmatch(code, -1)
		if len(all) != 1 || len(names) != 1 || names[0][1] != f.Name {
			t.Errorf("%s.sql: want exactly one CREATE OR REPLACE FUNCTION %s(...), found %q", f.Name, f.Name, all)
		}
	}
}

// TestFunctionFilesRequireEveryFunctionTheyCall: a file that calls the
// function of another file names it on a "-- requires:" line, so it is
// applied after it; and every requirement of a migration names a file.
func TestFunctionFilesRequireEveryFunctionTheyCall(t *testing.T) {
	t.Parallel()
	migrations, functions := embedded(t)
	names := make(map[string]bool, len(functions))
	for _, f := range functions {
		names[f.Name] = true
	}
	for _, f := range functions {
		code := sqlComment.ReplaceAllString(f.SQL, "")
		for other := range names {
			if other == f.Name || !regexp.MustCompile(`\b`+other+`\s*\(`).MatchString(code) {
				continue
			}
			if !slices.Contains(f.Requires, other) {
				t.Errorf("%s.sql calls %s but has no line \"-- requires: %s\"", f.Name, other, other)
			}
		}
	}
	for _, m := range migrations {
		for _, r := range m.Requires {
			if !names[r] {
				t.Errorf("%s.sql requires %s, which has no file", m.Version, r)
			}
		}
	}
}

// TestFunctionsAreOrderedByRequirementsThenByName: the order of function
// files depends on nothing but the files: requirements first, otherwise
// by name; a requirement without a file, or a circle, is an error.
func TestFunctionsAreOrderedByRequirementsThenByName(t *testing.T) {
	t.Parallel()
	fn := func(name string, requires ...string) schema.Function {
		return schema.Function{Name: name, Requires: requires}
	}
	order := func(list ...schema.Function) ([]string, error) {
		out, err := schema.OrderFunctions(list)
		var names []string
		for _, f := range out {
			names = append(names, f.Name)
		}
		return names, err
	}
	for _, c := range []struct {
		name string
		in   []schema.Function
		want []string
	}{
		{"by name", []schema.Function{fn("c"), fn("a"), fn("b")}, []string{"a", "b", "c"}},
		{"requirement first", []schema.Function{fn("b", "c"), fn("a"), fn("c")}, []string{"a", "c", "b"}},
		{"chain", []schema.Function{fn("a", "b"), fn("b", "c"), fn("c")}, []string{"c", "b", "a"}},
		{"shared requirement", []schema.Function{fn("x", "z"), fn("y", "z"), fn("z")}, []string{"z", "x", "y"}},
	} {
		got, err := order(c.in...)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	if _, err := order(fn("a", "b"), fn("b", "a")); err == nil || !strings.Contains(err.Error(), "a -> b -> a") {
		t.Errorf("a circle: err = %v, want one naming it", err)
	}
	if _, err := order(fn("a", "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a requirement without a file: err = %v, want one naming it", err)
	}
}
