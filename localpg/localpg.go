// Package localpg finds a Postgres for the zero-config `make run`.
//
// Order: an explicit DATABASE_URL is used as it is; otherwise the local
// server at 127.0.0.1:5432 (database actledger, created if missing); if none
// answers, a private cluster from the local PostgreSQL binaries is
// initialised under ./data/pg and started; if there are no binaries either,
// the error says in one message how to get a database. It is for
// development runs only: production always sets DATABASE_URL.
//
// The same private clusters, with a streaming standby of one
// (Private.Standby), are what actchaos crashes and fails over, and what
// the tests of a failover promote: a shared server must never be.
package localpg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultURL is where actledger looks when DATABASE_URL is unset.
const DefaultURL = "postgres://127.0.0.1:5432/actledger?sslmode=disable"

// privatePort is the port of the private cluster, away from a system one.
const privatePort = "54329"

// Config says where to look.
type Config struct {
	// URL from DATABASE_URL; empty means look locally.
	URL string
	// DataDir for a private cluster. Default "./data/pg".
	DataDir string
	Logger  *slog.Logger
}

// Ensure returns a URL of a reachable, existing database. stop, never nil,
// stops a private cluster if Ensure started one.
func Ensure(ctx context.Context, cfg Config) (dbURL string, stop func(), err error) {
	noop := func() {}
	logger := cmp.Or(cfg.Logger, slog.Default())
	if cfg.URL != "" {
		return cfg.URL, noop, nil
	}
	err = ensureDatabase(ctx, DefaultURL)
	if err == nil {
		return DefaultURL, noop, nil
	}
	if !refused(err) {
		return "", noop, fmt.Errorf("local Postgres at %s: %w", DefaultURL, err)
	}
	logger.InfoContext(ctx, "no Postgres at 127.0.0.1:5432; starting a private cluster", "data_dir", cmp.Or(cfg.DataDir, "./data/pg"))
	dbURL, stop, perr := startPrivate(ctx, cmp.Or(cfg.DataDir, "./data/pg"), logger)
	if perr != nil {
		return "", noop, fmt.Errorf("no database: nothing answers at 127.0.0.1:5432 and a private cluster could not be started (%v). "+
			"Start one with `docker compose up -d postgres`, or set DATABASE_URL", perr)
	}
	return dbURL, stop, nil
}

// ensureDatabase connects to dbURL, creating its database through the
// server's postgres database if it does not exist.
func ensureDatabase(ctx context.Context, dbURL string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err == nil {
		return conn.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		return err
	}
	u, perr := url.Parse(dbURL)
	if perr != nil {
		return perr
	}
	name := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres"
	admin, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		var dup *pgconn.PgError
		if !errors.As(err, &dup) || dup.Code != "42P04" { // duplicate_database: a racing start made it
			return fmt.Errorf("create database %s: %w", name, err)
		}
	}
	return nil
}

func refused(err error) bool {
	var connectErr *pgconn.ConnectError
	return errors.As(err, &connectErr) && strings.Contains(err.Error(), "connection refused")
}

// startPrivate initialises (once) and starts a cluster in dir on
// privatePort, with a database named actledger.
func startPrivate(ctx context.Context, dir string, logger *slog.Logger) (string, func(), error) {
	c, err := StartPrivate(ctx, dir, privatePort, logger)
	if err != nil {
		return "", nil, err
	}
	dbURL := c.URL("actledger")
	if err := ensureDatabase(ctx, dbURL); err != nil {
		c.Stop()
		return "", nil, err
	}
	return dbURL, c.Stop, nil
}

// Private is a PostgreSQL cluster of this process's own, from the local
// binaries: `make run`'s fallback, and the Postgres that actchaos crashes
// (SIGKILL) and restarts, which a shared server must never be.
type Private struct {
	// Dir holds the cluster's data, its socket and server.log.
	Dir string
	// Port is its TCP port on 127.0.0.1.
	Port   string
	bin    string
	logger *slog.Logger
}

// StartPrivate initialises (once) and starts a cluster in dir on port.
// PostgreSQL refuses to run as root, so as root it runs the binaries as
// the postgres system user, which then owns dir.
func StartPrivate(ctx context.Context, dir, port string, logger *slog.Logger) (*Private, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c := &Private{Dir: abs, Port: port, bin: bin, logger: cmp.Or(logger, slog.Default())}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, err
	}
	if err := c.own(ctx); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(abs, "PG_VERSION")); err != nil {
		c.logger.InfoContext(ctx, "initialising private Postgres cluster", "dir", abs)
		if err := c.run(ctx, "initdb", "-D", abs, "-U", "postgres", "--auth=trust", "-E", "UTF8"); err != nil {
			return nil, err
		}
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// URL is the URL of database on the cluster.
func (c *Private) URL(database string) string {
	return "postgres://postgres@127.0.0.1:" + c.Port + "/" + database + "?sslmode=disable"
}

// Start starts the cluster and waits until it accepts connections; after
// a Kill that includes crash recovery from the write-ahead log. Backends
// of a killed server may hold its shared memory for a moment: the start
// is tried again for a few seconds.
func (c *Private) Start(ctx context.Context) error {
	opts := fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1", c.Port, c.Dir)
	var err error
	for range 20 {
		if err = c.run(ctx, "pg_ctl", "-D", c.Dir, "-o", opts, "-l", filepath.Join(c.Dir, "server.log"), "-w", "start"); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
	return err
}

// Kill ends the server as a crash does: SIGKILL to the postmaster, whose
// backends then exit on their own; nothing is flushed or checkpointed.
func (c *Private) Kill() error {
	raw, err := os.ReadFile(filepath.Join(c.Dir, "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("read postmaster.pid: %w", err)
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return fmt.Errorf("postmaster.pid: %w", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill postmaster %d: %w", pid, err)
	}
	return nil
}

// Stop shuts the cluster down cleanly.
func (c *Private) Stop() {
	if err := c.run(context.Background(), "pg_ctl", "-D", c.Dir, "-m", "fast", "-w", "stop"); err != nil {
		c.logger.Warn("stop private Postgres", "err", err)
	}
}

// run runs one of the cluster's binaries (or, for a name that is not one,
// a command on PATH), as the postgres system user when this process is
// root.
func (c *Private) run(ctx context.Context, name string, args ...string) error {
	path := filepath.Join(c.bin, name)
	if _, err := os.Stat(path); err != nil {
		path = name
	}
	cmdArgs := append([]string{path}, args...)
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return errors.New("running as root and there is no postgres system user to run PostgreSQL as")
		}
		cmdArgs = append([]string{"runuser", "-u", "postgres", "--"}, cmdArgs...)
	}
	return c.command(ctx, cmdArgs[0], cmdArgs[1:]...)
}

// command runs name as this process's own user.
func (c *Private) command(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", filepath.Base(name), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// findBinaries returns the newest /usr/lib/postgresql/<v>/bin holding
// initdb, or the directory of initdb on PATH.
func findBinaries() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	if len(dirs) > 0 {
		return filepath.Dir(dirs[0]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server binaries (initdb) found")
}

func versionOf(path string) int {
	var v int
	// A directory that is no version number stays 0 and sorts last.
	_, _ = fmt.Sscanf(filepath.Base(filepath.Dir(filepath.Dir(path))), "%d", &v)
	return v
}
