package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
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
