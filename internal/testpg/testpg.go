// Package testpg gives a test a Postgres primary with a streaming standby
// of its own, private clusters from the local PostgreSQL binaries
// (localpg), for the tests that kill, promote and fence them: the
// machine's shared server must never be. They are stopped when the test
// ends.
package testpg

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/localpg"
)

// Pair is a primary and its standby.
type Pair struct {
	Primary, Standby *localpg.Private
}

// StandbyName is the standby's application_name.
const StandbyName = "standby"

// New starts a primary holding the databases named (besides postgres),
// then a streaming standby of it, synchronous when sync. Without the
// local PostgreSQL binaries the test is skipped.
func New(t *testing.T, sync bool, databases ...string) Pair {
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
	if len(databases) > 0 {
		conn, err := pgx.Connect(ctx, primary.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		for _, db := range databases {
			if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
				t.Fatal(err)
			}
		}
		conn.Close(ctx)
	}
	standby, err := primary.Standby(ctx, filepath.Join(dir, "standby"), freePort(t), StandbyName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Stop)
	if sync {
		if err := primary.RequireSynchronous(ctx, StandbyName); err != nil {
			t.Fatal(err)
		}
	}
	return Pair{Primary: primary, Standby: standby}
}

// URL is the URL of database over both hosts, read-write only
// (target_session_attrs), as an SRE configures a managed Postgres with a
// failover replica.
func (p Pair) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s,127.0.0.1:%s/%s?sslmode=disable&target_session_attrs=read-write",
		p.Primary.Port, p.Standby.Port, database)
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
