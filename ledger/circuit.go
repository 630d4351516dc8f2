package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Circuit is a provider's circuit breaker as the ledger holds it: the
// consecutive attempts it refused or left unanswered and, when open, since
// when and when the next probe may go. Every dispatcher process shares it,
// and GET /v1/dispatch and /metrics show it.
type Circuit struct {
	Provider string `db:"provider" json:"provider"`
	// Failures counts consecutive refused or unanswered attempts.
	Failures int `db:"failures" json:"failures"`
	// OpenedAt is set while the circuit is open.
	OpenedAt *time.Time `db:"opened_at" json:"opened_at"`
	// Cooldown is the wait before the next probe; it doubles while probes
	// fail.
	Cooldown *time.Duration `db:"cooldown" json:"-"`
	// ProbeAt is when the next probe may go.
	ProbeAt   *time.Time `db:"probe_at" json:"probe_at"`
	UpdatedAt time.Time  `db:"updated_at" json:"updated_at"`
}

// Open reports whether the circuit is open.
func (c Circuit) Open() bool { return c.OpenedAt != nil }

// CircuitPolicy is a provider's breaker settings (provider.Config.Breaker).
type CircuitPolicy struct {
	// Failures opens the circuit after that many consecutive refused or
	// unanswered attempts.
	Failures int
	// Cooldown is the first wait before a probe; MaxCooldown caps its
	// doubling.
	Cooldown, MaxCooldown time.Duration
}

const (
	circuitColumns = `provider, failures, opened_at, cooldown, probe_at, updated_at`

	// circuitFailure counts a refused or unanswered attempt: the circuit
	// opens when the count reaches @threshold; a failed probe (@probe)
	// doubles the cooldown, capped, and sets the next probe after it.
	circuitFailure = `INSERT INTO provider_circuits AS c (provider, failures, opened_at, cooldown, probe_at, updated_at)
VALUES (@provider, 1,
    CASE WHEN @threshold <= 1 THEN @now::timestamptz END,
    CASE WHEN @threshold <= 1 THEN @cooldown::interval END,
    CASE WHEN @threshold <= 1 THEN @now::timestamptz + @cooldown::interval END,
    @now::timestamptz)
ON CONFLICT (provider) DO UPDATE SET
    failures = c.failures + 1,
    opened_at = CASE WHEN c.opened_at IS NOT NULL THEN c.opened_at
                     WHEN c.failures + 1 >= @threshold THEN @now::timestamptz END,
    cooldown = CASE WHEN c.opened_at IS NOT NULL AND @probe THEN least(c.cooldown * 2, @max_cooldown::interval)
                    WHEN c.opened_at IS NOT NULL THEN c.cooldown
                    WHEN c.failures + 1 >= @threshold THEN @cooldown::interval END,
    probe_at = CASE WHEN c.opened_at IS NOT NULL AND @probe THEN @now::timestamptz + least(c.cooldown * 2, @max_cooldown::interval)
                    WHEN c.opened_at IS NOT NULL THEN c.probe_at
                    WHEN c.failures + 1 >= @threshold THEN @now::timestamptz + @cooldown::interval END,
    updated_at = @now::timestamptz
RETURNING ` + circuitColumns

	// circuitClose ends a provider's failures: a success closes it.
	circuitClose = `DELETE FROM provider_circuits WHERE provider = $1`

	// circuitTakeProbe lets one claim through an open circuit once its
	// probe is due, and moves the next probe a cooldown on, so that the
	// others keep waiting while the probe is out.
	circuitTakeProbe = `UPDATE provider_circuits SET probe_at = @now::timestamptz + cooldown, updated_at = @now::timestamptz
WHERE provider = @provider AND opened_at IS NOT NULL AND probe_at <= @now::timestamptz
RETURNING ` + circuitColumns

	// circuitsList is bounded by the configured providers (one row each).
	circuitsList = `SELECT ` + circuitColumns + ` FROM provider_circuits ORDER BY provider LIMIT 1000`
)

// CircuitFailure records that an attempt at provider was refused or left
// unanswered, probe saying whether it was the open circuit's probe, and
// returns the circuit as it now is.
func (s *Store) CircuitFailure(ctx context.Context, provider string, p CircuitPolicy, probe bool) (Circuit, error) {
	rows, _ := s.pool.Query(ctx, circuitFailure, pgx.StrictNamedArgs{
		"provider": provider, "threshold": p.Failures, "cooldown": p.Cooldown, "max_cooldown": p.MaxCooldown,
		"probe": probe, "now": s.Now(),
	})
	c, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Circuit])
	if err != nil {
		return Circuit{}, fmt.Errorf("record a failure of provider %s: %w", provider, err)
	}
	return c, nil
}

// CircuitClose closes provider's circuit: an attempt got an answer.
func (s *Store) CircuitClose(ctx context.Context, provider string) error {
	if _, err := s.pool.Exec(ctx, circuitClose, provider); err != nil {
		return fmt.Errorf("close the circuit of provider %s: %w", provider, err)
	}
	return nil
}

// TakeProbe reports whether this caller may send provider's probe now;
// the circuit as it is comes back either way it was read.
func (s *Store) TakeProbe(ctx context.Context, provider string) (bool, error) {
	rows, _ := s.pool.Query(ctx, circuitTakeProbe, pgx.StrictNamedArgs{"provider": provider, "now": s.Now()})
	_, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Circuit])
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("take the probe of provider %s: %w", provider, err)
	}
	return true, nil
}

// Circuits returns every provider's circuit that has failures, open or
// not, by provider name.
func (s *Store) Circuits(ctx context.Context) ([]Circuit, error) {
	rows, _ := s.pool.Query(ctx, circuitsList)
	cs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Circuit])
	if err != nil {
		return nil, fmt.Errorf("list circuits: %w", err)
	}
	return cs, nil
}
