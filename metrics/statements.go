package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	reconcileFindingsDesc = prometheus.NewDesc("actledger_reconcile_findings_total",
		"Findings of the providers' statement runs (dry runs excluded): matched, settles, mismatch, duplicate, missing, unexplained, foreign, skipped.",
		[]string{"provider", "finding"}, nil)
	reconcileLastRunDesc = prometheus.NewDesc("actledger_reconcile_last_run_timestamp_seconds",
		"When the provider's last statement run ended, whatever its status.", []string{"provider"}, nil)
)

const (
	// statementTotals reads the totals FinishStatementRun keeps: a row per
	// provider and finding.
	statementTotals = `SELECT provider, finding, n FROM statement_totals ORDER BY provider, finding LIMIT 10000`
	// statementLastRuns reads each provider's newest ended run, skipping
	// from provider to provider along statement_runs_provider_idx: a few
	// index probes per provider, however many runs are kept.
	statementLastRuns = `WITH RECURSIVE providers(name) AS (
    (SELECT provider FROM statement_runs ORDER BY provider LIMIT 1)
    UNION ALL
    SELECT (SELECT provider FROM statement_runs WHERE provider > providers.name ORDER BY provider LIMIT 1)
    FROM providers WHERE providers.name IS NOT NULL
)
SELECT providers.name, r.finished FROM providers CROSS JOIN LATERAL (
    SELECT extract(epoch FROM finished_at)::float8 AS finished FROM statement_runs
    WHERE provider = providers.name AND finished_at IS NOT NULL
    ORDER BY started_at DESC LIMIT 1
) r
WHERE providers.name IS NOT NULL`
)

// statementCollector reports the statement runs from the ledger, which
// every process shares.
type statementCollector struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

func (c *statementCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- reconcileFindingsDesc
	ch <- reconcileLastRunDesc
}

func (c *statementCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := c.pool.Query(ctx, statementTotals)
	if err != nil {
		c.log.WarnContext(ctx, "metrics: statement totals", "err", err)
		return
	}
	var provider, finding string
	var n int64
	for rows.Next() {
		if err := rows.Scan(&provider, &finding, &n); err != nil {
			rows.Close()
			c.log.WarnContext(ctx, "metrics: statement totals", "err", err)
			return
		}
		ch <- prometheus.MustNewConstMetric(reconcileFindingsDesc, prometheus.CounterValue, float64(n), provider, finding)
	}
	rows.Close()
	rows, err = c.pool.Query(ctx, statementLastRuns)
	if err != nil {
		c.log.WarnContext(ctx, "metrics: last statement runs", "err", err)
		return
	}
	defer rows.Close()
	var at float64
	for rows.Next() {
		if err := rows.Scan(&provider, &at); err != nil {
			c.log.WarnContext(ctx, "metrics: last statement runs", "err", err)
			return
		}
		ch <- prometheus.MustNewConstMetric(reconcileLastRunDesc, prometheus.GaugeValue, at, provider)
	}
}
