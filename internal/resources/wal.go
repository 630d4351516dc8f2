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

const walPosition = `SELECT pg_current_wal_lsn()::text`

const walSince = `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`

// WALMark remembers a position in the server's WAL. The WAL is the
// server's, not a database's: Bytes counts what every database wrote
// since (autovacuum included), so a benchmark measures with nothing else
// writing.
type WALMark struct {
	q   Querier
	lsn string
}

// MarkWAL reads the server's current WAL position through q.
func MarkWAL(ctx context.Context, q Querier) (WALMark, error) {
	m := WALMark{q: q}
	if err := q.QueryRow(ctx, walPosition).Scan(&m.lsn); err != nil {
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
