package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/schema"
)

// TestMigrateAppliesEveryMigrationToAnEmptyDatabase: `actledger migrate`
// brings the database DATABASE_URL names to the schema compiled into the
// binary, and a second run finds nothing to do.
func TestMigrateAppliesEveryMigrationToAnEmptyDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, testdb.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	name := "actledger_migrate_" + uuid.NewString()[:8]
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testdb.AdminURL())
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
	})
	u, err := url.Parse(testdb.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	getenv := onlyDatabase(u.String())
	migrations, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	for pass := 1; pass <= 2; pass++ {
		if err := run(t.Context(), []string{"migrate"}, getenv, io.Discard, io.Discard); err != nil {
			t.Fatalf("migrate (run %d): %v", pass, err)
		}
		conn, err := pgx.Connect(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		var applied int
		var ops bool
		err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM schema_migrations), to_regclass('operations') IS NOT NULL`).Scan(&applied, &ops)
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprint(applied, ops), fmt.Sprint(len(migrations), true); got != want {
			t.Errorf("run %d: migrations applied, operations table = %s, want %s", pass, got, want)
		}
	}
}
