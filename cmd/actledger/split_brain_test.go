package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/localpg"
)

// failoverPair is a private primary with an asynchronous streaming
// standby, and the URL of database actledger over both hosts, read-write
// only, as an SRE configures a managed Postgres with a failover replica.
func failoverPair(t *testing.T) (primary, standby *localpg.Private, dbURL string) {
	t.Helper()
	if _, err := os.Stat("/usr/lib/postgresql"); err != nil {
		t.Skip("no PostgreSQL server binaries on this machine")
	}
	ctx := context.Background()
	dir := t.TempDir()
	// The clusters' owner (the postgres system user, as root) must reach
	// into the test's directory (t.TempDir makes two levels of 0700).
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	primary, err := localpg.StartPrivate(ctx, filepath.Join(dir, "primary"), freePort(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(primary.Stop)
	conn, err := pgx.Connect(ctx, primary.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE DATABASE actledger`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	standby, err = primary.Standby(ctx, filepath.Join(dir, "standby"), freePort(t), "standby")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Stop)
	dbURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%s,127.0.0.1:%s/actledger?sslmode=disable&target_session_attrs=read-write", primary.Port, standby.Port)
	return primary, standby, dbURL
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// TestTwoWritableHostsInTheURLStopEveryCommand: a standby promoted while
// the old primary still runs (split brain) leaves two hosts of a
// multi-host DATABASE_URL taking writes; actledger refuses to start,
// naming both, until the old primary is fenced (here: killed), and then
// runs on the promoted one.
func TestTwoWritableHostsInTheURLStopEveryCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary, standby, dbURL := failoverPair(t)
	getenv := func(k string) string {
		if k == "DATABASE_URL" {
			return dbURL
		}
		return ""
	}
	if err := run(ctx, []string{"migrate"}, getenv, io.Discard, io.Discard); err != nil {
		t.Fatalf("migrate with one primary and its standby: %v", err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	err := run(ctx, []string{"migrate"}, getenv, io.Discard, io.Discard)
	if !errors.Is(err, errTwoPrimaries) || !strings.Contains(err.Error(), "127.0.0.1:"+primary.Port) || !strings.Contains(err.Error(), "127.0.0.1:"+standby.Port) {
		t.Fatalf("migrate with two writable hosts: %v, want errTwoPrimaries naming both", err)
	}
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, []string{"migrate"}, getenv, io.Discard, io.Discard); err != nil {
		t.Fatalf("migrate once the old primary is fenced: %v", err)
	}
}
