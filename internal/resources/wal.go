package resources

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Querier is what a WAL mark reads the server's WAL position through: a
// *pgxpool.Pool or a *pgx.Conn connected to any database of the server.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// walPosition is the server's WAL position and the full-page images its
// backends have reported writing (pg_stat_wal, Postgres 14 and later).
const walPosition = `SELECT pg_current_wal_lsn()::text, (SELECT wal_fpi FROM pg_stat_wal)`

const walSince = `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`

// walFPI is the full-page images written so far; pg_stat_force_next_flush
// makes this backend report its own first (others report at least once
// a second while they work).
const walFPI = `SELECT wal_fpi FROM pg_stat_wal, pg_stat_force_next_flush()`

// WALMark remembers a position in the server's WAL. The WAL is the
// server's, not a database's: Bytes counts what every database wrote
// since (autovacuum included), so a benchmark measures with nothing else
// writing.
type WALMark struct {
	q   Querier
	lsn string
	fpi int64
}

// MarkWAL reads the server's current WAL position through q.
func MarkWAL(ctx context.Context, q Querier) (WALMark, error) {
	m := WALMark{q: q}
	if err := q.QueryRow(ctx, walPosition).Scan(&m.lsn, &m.fpi); err != nil {
		return m, fmt.Errorf("read WAL position: %w", err)
	}
	return m, nil
}

// Bytes is how many bytes the server wrote to its WAL since the mark.
func (m WALMark) Bytes(ctx context.Context) (int64, error) {
	var n int64
	if err := m.q.QueryRow(ctx, walSince, m.lsn).Scan(&n); err != nil {
		return 0, fmt.Errorf("read WAL position: %w", err)
	}
	return n, nil
}

// FullPageImages is how many full-page images the server wrote to its WAL
// since the mark: a page's first change after a checkpoint logs the whole
// page (8 kB) rather than the change, so a workload that touches many
// pages once each (random leaves of a large index) writes mostly these.
// Backends report them to pg_stat_wal at most once a second, so over a
// window of a few seconds the count is good to about a second's worth.
func (m WALMark) FullPageImages(ctx context.Context) (int64, error) {
	var n int64
	if err := m.q.QueryRow(ctx, walFPI).Scan(&n); err != nil {
		return 0, fmt.Errorf("read WAL statistics: %w", err)
	}
	return n - m.fpi, nil
}
