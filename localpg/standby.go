package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
)

// A standby is a streaming replica of a Private cluster, made from a base
// backup of it: the pair actchaos fails over, and the tests that prove
// what a synchronous standby keeps and an asynchronous one loses
// (docs/reliability.md, "Postgres failover").

// Standby makes a streaming replica of c in dir on port, named name (its
// application_name, the name synchronous_standby_names lists), and starts
// it; it returns once the replica accepts read-only connections. The
// replica streams asynchronously until c lists it (RequireSynchronous).
func (c *Private) Standby(ctx context.Context, dir, port, name string) (*Private, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	s := &Private{Dir: abs, Port: port, bin: c.bin, logger: c.logger}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, err
	}
	if err := s.own(ctx); err != nil {
		return nil, err
	}
	// -R writes standby.signal and the primary's address; the line added
	// after it names the replica to the primary, and a later line of
	// postgresql.auto.conf overrides an earlier one.
	if err := s.run(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", c.Port, "-U", "postgres", "-D", abs,
		"-R", "-X", "stream", "-c", "fast"); err != nil {
		return nil, err
	}
	// The backup carries the primary's own list of synchronous standbys,
	// which would make the replica, once promoted, wait for a standby
	// that is not there.
	conf := fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%s user=postgres application_name=%s'\nsynchronous_standby_names = ''\n", c.Port, name)
	if err := s.appendAutoConf(ctx, conf); err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// appendAutoConf adds lines to the cluster's postgresql.auto.conf, as
// its owner.
func (c *Private) appendAutoConf(ctx context.Context, lines string) error {
	return c.run(ctx, "sh", "-c", `printf '%s' "$1" >> "$2"`, "sh", lines, filepath.Join(c.Dir, "postgresql.auto.conf"))
}

// RequireSynchronous makes c, a primary, wait for standby name to hold
// each commit before acknowledging it (synchronous_commit = on, the
// default), and returns once that standby streams synchronously.
func (c *Private) RequireSynchronous(ctx context.Context, name string) error {
	if err := c.exec(ctx, fmt.Sprintf(`ALTER SYSTEM SET synchronous_standby_names = '"%s"'`, name)); err != nil {
		return err
	}
	if err := c.exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		return err
	}
	return c.waitFor(ctx, "standby "+name+" to stream synchronously",
		`SELECT EXISTS (SELECT 1 FROM pg_stat_replication WHERE application_name = $1 AND sync_state = 'sync')`, name)
}

// Streaming says whether standby name streams from c, and synchronously.
func (c *Private) Streaming(ctx context.Context, name string) (streaming, synchronous bool, err error) {
	err = c.query(ctx, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT count(*) > 0, coalesce(bool_or(sync_state = 'sync'), false)
FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'`, name).Scan(&streaming, &synchronous)
	})
	return streaming, synchronous, err
}

// WaitReplayed returns once c, a standby, has replayed everything primary
// had written when it was called.
func (c *Private) WaitReplayed(ctx context.Context, primary *Private) error {
	var lsn string
	if err := primary.query(ctx, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn)
	}); err != nil {
		return err
	}
	return c.waitFor(ctx, "replay to reach "+lsn, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn)
}

// StopReceiving ends c's WAL receiver, as a replica that fell behind:
// commits the primary makes from now on never reach it. The primary
// must not wait for it (an asynchronous standby), or its commits hang.
func (c *Private) StopReceiving(ctx context.Context) error {
	if err := c.exec(ctx, `ALTER SYSTEM SET primary_conninfo = ''`); err != nil {
		return err
	}
	if err := c.exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		return err
	}
	return c.waitFor(ctx, "the WAL receiver to stop", `SELECT NOT EXISTS (SELECT 1 FROM pg_stat_wal_receiver)`)
}

// Promote makes c, a standby, a primary, and returns once it accepts
// writes.
func (c *Private) Promote(ctx context.Context) error {
	if err := c.run(ctx, "pg_ctl", "-D", c.Dir, "-w", "promote"); err != nil {
		return err
	}
	return c.waitFor(ctx, "the promoted standby to accept writes", `SELECT NOT pg_is_in_recovery()`)
}

// Remove deletes the cluster's files; it must be stopped or killed.
func (c *Private) Remove() error {
	return os.RemoveAll(c.Dir)
}

// own gives the cluster's directory to the postgres system user when this
// process is root: PostgreSQL runs as that user (run).
func (c *Private) own(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return nil
	}
	return c.command(ctx, "chown", "postgres:postgres", c.Dir)
}

// exec runs one statement on c's postgres database.
func (c *Private) exec(ctx context.Context, sql string, args ...any) error {
	return c.query(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, sql, args...)
		return err
	})
}

func (c *Private) query(ctx context.Context, f func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to the cluster on port %s: %w", c.Port, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := f(conn); err != nil {
		return fmt.Errorf("cluster on port %s: %w", c.Port, err)
	}
	return nil
}

// waitFor polls query (one boolean) until it is true, for at most
// replicationWait.
func (c *Private) waitFor(ctx context.Context, what, query string, args ...any) error {
	ctx, cancel := context.WithTimeout(ctx, replicationWait)
	defer cancel()
	for {
		var ok bool
		err := c.query(ctx, func(conn *pgx.Conn) error { return conn.QueryRow(ctx, query, args...).Scan(&ok) })
		if err == nil && ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s on port %s: %w", what, c.Port, errors.Join(ctx.Err(), err))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// replicationWait bounds each wait for a replication state.
const replicationWait = 30 * time.Second
