package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/actledger/actledger/internal/startstop"
	"github.com/actledger/actledger/internal/testcluster"
	"github.com/actledger/actledger/localpg"
)

// pgNode is one of the private Postgres clusters: the primary or its
// synchronous standby, named by its application_name.
type pgNode struct {
	*localpg.Private
	name string
}

// startPostgres starts the private primary and, unless -no-standby, a
// synchronous standby of it, and returns the maintenance database's URL
// over every host, read-write only (target_session_attrs), as the
// actledger processes reach theirs.
func (s *soak) startPostgres(ctx context.Context) string {
	e := s.e
	ports := testcluster.FreePorts(e, 2)
	pg, err := localpg.StartPrivate(ctx, filepath.Join(e.dir, "pg-a"), fmt.Sprint(ports[0]), slog.New(slog.DiscardHandler))
	if err != nil {
		e.Fatalf("private Postgres: %v", err)
	}
	s.pg = &pgNode{Private: pg, name: "pg_a"}
	// The clusters of the end of the run: failovers change which they are.
	e.Cleanup(func() {
		s.pg.Stop()
		if s.standby != nil {
			s.standby.Stop()
		}
	})
	if s.o.noStandby {
		return pg.URL("postgres")
	}
	standby, err := pg.Standby(ctx, filepath.Join(e.dir, "pg-b"), fmt.Sprint(ports[1]), "pg_b")
	if err != nil {
		e.Fatalf("standby of the private Postgres: %v", err)
	}
	s.standby = &pgNode{Private: standby, name: "pg_b"}
	if err := pg.RequireSynchronous(ctx, s.standby.name); err != nil {
		e.Fatal(err)
	}
	return multiHost("postgres", []string{"127.0.0.1:" + s.pg.Port, "127.0.0.1:" + s.standby.Port}, "postgres")
}

// multiHost is a URL of database over hosts that connects to the first
// of them that takes writes: the multi-host DATABASE_URL of
// docs/reliability.md.
func multiHost(user string, hosts []string, database string) string {
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&target_session_attrs=read-write", user, strings.Join(hosts, ","), database)
}

// failover kills the primary as a crash does and promotes its
// synchronous standby, which then holds every commit the primary
// acknowledged; after outage a new synchronous standby is made of the new
// primary where the old one was, so a later fault may fail over again.
// It returns the fault's name for the table.
func (s *soak) failover(ctx context.Context, outage time.Duration) string {
	if _, sync, err := s.pg.Streaming(ctx, s.standby.name); err != nil || !sync {
		return "failover postgres skipped: the standby is not synchronous"
	}
	if err := s.pg.Kill(); err != nil {
		return "failover postgres failed: " + err.Error()
	}
	if err := s.standby.Promote(ctx); err != nil {
		s.e.Fatalf("promote the standby: %v", err)
	}
	old, primary := s.pg, s.standby
	s.pg, s.standby = primary, nil
	startstop.Sleep(ctx, outage)
	// A new directory: the killed server's backends may still be
	// exiting from the old one.
	s.generation++
	dir := filepath.Join(s.e.dir, fmt.Sprintf("%s-%d", strings.ReplaceAll(old.name, "_", "-"), s.generation))
	_ = old.Remove()
	standby, err := primary.Standby(context.WithoutCancel(ctx), dir, old.Port, old.name)
	if err != nil {
		s.e.Fatalf("a new standby after the failover: %v", err)
	}
	if err := primary.RequireSynchronous(context.WithoutCancel(ctx), old.name); err != nil {
		s.e.Fatal(err)
	}
	s.standby = &pgNode{Private: standby, name: old.name}
	return "failover postgres " + old.name + " → " + primary.name
}
