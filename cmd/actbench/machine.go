package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/broker"
)

// facts head the report: what the figures were measured on.
type facts struct {
	Cores, GOMAXPROCS int
	GoVersion         string
	Postgres          string // server_version
	PostgresSettings  string // the settings that bound commit rates
	NATS              string // nats-server version
	JetStream         string // storage, replicas, sync
	// Load is the machine's load average (1, 5, 15 min) when the run
	// started: other work on the machine skews every figure.
	Load string
	// Revision is the git commit measured, and whether the work tree had
	// changes, when git can tell.
	Revision string
}

// revision asks git which commit the work tree is at.
func revision(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	head, err := exec.CommandContext(ctx, "git", "log", "-1", "--format=%h %s").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(head))
	if changed, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(changed) > 0 {
		rev += " (and uncommitted changes)"
	}
	return rev
}

// postgresSettings are the server settings that bound a commit rate.
const postgresSettings = `SELECT current_setting('server_version'), current_setting('synchronous_commit'),
    current_setting('fsync'), current_setting('wal_sync_method'), current_setting('shared_buffers'),
    current_setting('max_connections'), current_setting('autovacuum')`

// machineFacts asks the servers what they are: Postgres's version and
// commit settings; nats-server's version and the storage of a stream as
// actledger creates it (on a throwaway prefix). A remote nats-server does
// not tell its sync_interval, so the report says so.
func machineFacts(ctx context.Context, e *env) (facts, error) {
	f := facts{Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	f.Revision = revision(ctx)
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		if fields := strings.Fields(string(raw)); len(fields) >= 3 {
			f.Load = strings.Join(fields[:3], " ")
		}
	}
	conn, err := pgx.Connect(ctx, e.adminURL)
	if err != nil {
		return f, fmt.Errorf("connect to %s (is Postgres running? set BENCH_DATABASE_URL): %w", e.adminURL, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var syncCommit, fsync, walSync, buffers, maxConns, autovacuum string
	if err := conn.QueryRow(ctx, postgresSettings).Scan(&f.Postgres, &syncCommit, &fsync, &walSync, &buffers, &maxConns, &autovacuum); err != nil {
		return f, fmt.Errorf("read Postgres settings: %w", err)
	}
	f.PostgresSettings = fmt.Sprintf("synchronous_commit %s, fsync %s, wal_sync_method %s, shared_buffers %s, max_connections %s, autovacuum %s",
		syncCommit, fsync, walSync, buffers, maxConns, autovacuum)

	b, err := broker.Connect(ctx, broker.Config{URL: e.natsURL, Prefix: strings.ToUpper(uniqueName("BENCH")), Name: "actbench", Logger: quiet()})
	if err != nil {
		return f, fmt.Errorf("connect to NATS at %s (is nats-server -js running? set BENCH_NATS_URL): %w", e.natsURL, err)
	}
	defer func() {
		_ = b.DeleteStreams(context.WithoutCancel(ctx))
		b.Close()
	}()
	f.NATS = b.ServerVersion()
	s, err := b.JetStream().Stream(ctx, b.OpsStream())
	if err != nil {
		return f, fmt.Errorf("read the ops stream's settings: %w", err)
	}
	c := s.CachedInfo().Config
	f.JetStream = fmt.Sprintf("%s storage, %d replica(s), duplicate window %s; sync: server default (not verifiable remotely)",
		c.Storage, c.Replicas, c.Duplicates)
	return f, nil
}
