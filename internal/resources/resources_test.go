package resources

import (
	"context"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testdb"
)

// TestServerOfCountsTheMeasuredBackendsAndTheServers: a backend counts
// only when its database has the prefix; the server's own processes and
// nats-server always do; anything else never.
func TestServerOfCountsTheMeasuredBackendsAndTheServers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, cmdline string
		prefix        string // peers_ when empty
		want          server
	}{
		{"backend of a measured database", "postgres: postgres peers_river_17 127.0.0.1(40112) idle", "", postgres},
		{"backend in a transaction", "postgres: postgres actbench_x1 127.0.0.1(40112) INSERT waiting", "actbench_", postgres},
		{"another prefix's backend", "postgres: postgres actbench_x1 127.0.0.1(40112) idle", "", notCounted},
		{"another client's backend", "postgres: postgres shop 127.0.0.1(40113) idle", "", notCounted},
		{"a prefix inside another name", "postgres: postgres old_peers_x 127.0.0.1(40114) idle", "", notCounted},
		{"WAL writer", "postgres: walwriter ", "", postgres},
		{"checkpointer", "postgres: checkpointer ", "", postgres},
		{"postmaster", "/usr/lib/postgresql/15/bin/postgres\x00-D\x00/var/lib/postgresql/15/main\x00", "", postgres},
		{"nats-server", "/usr/local/bin/nats-server\x00-js\x00", "", nats},
		{"nats-server from PATH", "nats-server\x00-js\x00", "", nats},
		{"a shell", "/bin/bash\x00-c\x00postgres: fake\x00", "", notCounted},
		{"an exited process", "", "", notCounted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := tc.prefix
			if prefix == "" {
				prefix = "peers_"
			}
			if got := serverOf(tc.cmdline, prefix); got != tc.want {
				t.Errorf("serverOf(%q, %q) = %d, want %d", tc.cmdline, prefix, got, tc.want)
			}
		})
	}
}

// TestStatCPUAddsUserAndSystemTime reads utime + stime even when the
// command name holds spaces and parentheses, and nothing from a torn line.
func TestStatCPUAddsUserAndSystemTime(t *testing.T) {
	t.Parallel()
	rest := " S 1 1 1 0 -1 4194560 100 0 0 0 250 30 0 0 20 0 1 0 100 1000 10"
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
	}{
		{"plain", "42 (postgres)" + rest, 2800 * time.Millisecond},
		{"spaces and parentheses in the name", "42 (a (b) c)" + rest, 2800 * time.Millisecond},
		{"no name", "42 postgres S 1", 0},
		{"cut short", "42 (postgres) S 1 1 1", 0},
		{"not numbers", "42 (postgres) S 1 1 1 0 -1 4194560 100 0 0 0 x y 0", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := statCPU(tc.stat); got != tc.want {
				t.Errorf("statCPU(%q) = %s, want %s", tc.stat, got, tc.want)
			}
		})
	}
}

// TestMeterSeesThisProcessAndTheMeasuredBackend burns CPU in this process
// and in a backend of a database named by the prefix, and finds both in
// the Use; the WAL mark finds the bytes an insert wrote.
func TestMeterSeesThisProcessAndTheMeasuredBackend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	var name string
	if err := pool.QueryRow(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE filler (v text)`); err != nil {
		t.Fatal(err)
	}

	wal, err := MarkWAL(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	m := Start(name)
	for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); {
	}
	if _, err := pool.Exec(ctx, `SELECT count(*) FROM generate_series(1, 3000000)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO filler SELECT repeat('x', 100) FROM generate_series(1, 1000)`); err != nil {
		t.Fatal(err)
	}
	u := m.Stop()
	n, err := wal.Bytes(ctx)
	if err != nil {
		t.Fatal(err)
	}

	if u.Self == 0 || u.Wall < 100*time.Millisecond {
		t.Errorf("this process used %s in %s around a 100ms spin", u.Self, u.Wall)
	}
	if u.Postgres == 0 {
		t.Errorf("no Postgres CPU after a 3,000,000-row series in %s", name)
	}
	if n < 100*1000 {
		t.Errorf("WAL grew %d bytes for 1,000 rows of 100 bytes", n)
	}
}
