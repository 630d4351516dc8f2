package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// replicationSettingsSelect reads what the server actledger's connections
// reach says of its replication: the standbys a commit waits for, whether
// a commit of this session waits for them (synchronous_commit may be set
// per database or role, so the session's value is the one that counts),
// and whether the server is itself a standby.
const replicationSettingsSelect = `SELECT current_setting('synchronous_standby_names'),
	current_setting('synchronous_commit'), pg_is_in_recovery()`

// replication is the answer of replicationSettingsSelect.
type replication struct {
	StandbyNames string
	Commit       string
	InRecovery   bool
}

// readReplication asks the server.
func readReplication(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (replication, error) {
	var r replication
	if err := db.QueryRow(ctx, replicationSettingsSelect).Scan(&r.StandbyNames, &r.Commit, &r.InRecovery); err != nil {
		return replication{}, fmt.Errorf("read the primary's replication settings: %w", err)
	}
	return r, nil
}

// errStandby is returned when DATABASE_URL reaches a standby: actledger
// writes every change, and a standby takes none.
var errStandby = errors.New("DATABASE_URL reaches a standby (pg_is_in_recovery() is true): actledger needs the primary; " +
	"list the hosts of the cluster with target_session_attrs=read-write so that the writable one is chosen (docs/reliability.md, \"Postgres failover\")")

// synchronous says whether a commit acknowledged to actledger is on a
// standby too: a standby is named and commits wait for it (on,
// remote_write or remote_apply; local and off do not wait).
func (r replication) synchronous() bool {
	switch strings.ToLower(r.Commit) {
	case "on", "remote_write", "remote_apply":
		return strings.TrimSpace(r.StandbyNames) != ""
	}
	return false
}

// warnWithoutSynchronousStandby logs once, at WARN, when no synchronous
// standby holds what actledger commits, naming what that risks: a
// failover to an asynchronous replica, or a point-in-time restore, can
// lose the last acknowledged operations, and the ledger then is behind
// the suppliers. Replication below Postgres (a managed Multi-AZ instance
// that replicates its storage) does not show in these settings; the line
// says so.
func warnWithoutSynchronousStandby(r replication, logger *slog.Logger) {
	if r.synchronous() {
		logger.Info("Postgres commits wait for a synchronous standby", "synchronous_standby_names", r.StandbyNames,
			"synchronous_commit", r.Commit)
		return
	}
	logger.Warn("no synchronous standby: a failover to an asynchronous replica or a point-in-time restore can lose "+
		"the last seconds of operations actledger acknowledged, whose effects may already exist at the suppliers "+
		"(unless the storage under Postgres is replicated synchronously, as a managed Multi-AZ instance does); "+
		"see docs/reliability.md, \"Postgres failover\"",
		"synchronous_standby_names", r.StandbyNames, "synchronous_commit", r.Commit)
}

// errTwoPrimaries is returned when more than one host of DATABASE_URL
// takes writes: a standby was promoted while the old primary still runs
// (split brain). target_session_attrs=read-write would pick the first of
// them for each new connection, so connections made before and after a
// change of the list's answers could write to both, and each would hold
// half of the ledger. Fencing the old primary is the operator's (or the
// managed service's) job; actledger refuses to start until it is done.
var errTwoPrimaries = errors.New("more than one host of DATABASE_URL takes writes")

// hostProbeTimeout bounds the probe of each host of a multi-host URL: a
// host that does not answer is taken for a stopped old primary.
const hostProbeTimeout = 5 * time.Second

// checkOnePrimary asks each host of a multi-host DATABASE_URL on its own
// whether it takes writes, and returns errTwoPrimaries, naming them, when
// more than one does. Hosts that cannot be reached are not counted: a
// dead old primary is what a failover leaves.
func checkOnePrimary(ctx context.Context, cfg *pgx.ConnConfig) error {
	// sslmode prefer and allow list each host twice (with TLS and
	// without): one probe a host, the first way the URL lists.
	hosts := []*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}
	names := []string{hostName(hosts[0])}
	for _, f := range cfg.Fallbacks {
		if !slices.Contains(names, hostName(f)) {
			hosts, names = append(hosts, f), append(names, hostName(f))
		}
	}
	if len(hosts) < 2 {
		return nil
	}
	var writable []string
	for i, h := range hosts {
		one := cfg.Copy()
		one.Host, one.Port, one.TLSConfig = h.Host, h.Port, h.TLSConfig
		one.Fallbacks, one.ValidateConnect = nil, nil
		if primary, err := takesWrites(ctx, one); err == nil && primary {
			writable = append(writable, names[i])
		}
	}
	if len(writable) > 1 {
		return fmt.Errorf("%w: %s (a standby promoted while the old primary still runs): fence the old primary, "+
			"or take it out of the URL, before actledger runs; nothing was changed (docs/reliability.md, \"Split brain\")",
			errTwoPrimaries, strings.Join(writable, ", "))
	}
	return nil
}

// takesWrites says whether the one host of cfg is a primary.
func takesWrites(ctx context.Context, cfg *pgx.ConnConfig) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, hostProbeTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var inRecovery bool
	err = conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery)
	return !inRecovery, err
}

func hostName(f *pgconn.FallbackConfig) string {
	return net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port)))
}
