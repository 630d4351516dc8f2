package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	circuitOpenDesc = prometheus.NewDesc("actledger_provider_circuit_open",
		"1 while the provider's circuit is open (new attempts wait for a probe), 0 while it counts failures; a provider without failures has no series.",
		[]string{"provider"}, nil)
	circuitFailuresDesc = prometheus.NewDesc("actledger_provider_circuit_failures",
		"Consecutive attempts the provider refused or left unanswered.", []string{"provider"}, nil)
)

// circuitsList reads the providers' circuits (at most one row per
// configured provider).
const circuitsList = `SELECT provider, failures, opened_at IS NOT NULL FROM provider_circuits ORDER BY provider LIMIT 1000`

// circuitCollector reports the providers' circuit breakers from the
// ledger, which every dispatcher process shares.
type circuitCollector struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

func (c *circuitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- circuitOpenDesc
	ch <- circuitFailuresDesc
}

func (c *circuitCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := c.pool.Query(ctx, circuitsList)
	if err != nil {
		c.log.WarnContext(ctx, "metrics: provider circuits", "err", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var provider string
		var failures int64
		var open bool
		if err := rows.Scan(&provider, &failures, &open); err != nil {
			c.log.WarnContext(ctx, "metrics: provider circuits", "err", err)
			return
		}
		v := 0.0
		if open {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(circuitOpenDesc, prometheus.GaugeValue, v, provider)
		ch <- prometheus.MustNewConstMetric(circuitFailuresDesc, prometheus.GaugeValue, float64(failures), provider)
	}
}
