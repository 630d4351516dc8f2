// Package metrics exposes actledger's state in the Prometheus text format.
//
// Gauges that describe the ledger (operations by state, outbox backlog and
// lag) are read from Postgres at scrape time, so every process reports the
// same truth and nothing drifts; counters of events seen by one process live
// with the component that counts them and register here.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/outbox"
)

// Registry holds actledger's collectors.
type Registry struct {
	reg *prometheus.Registry
}

// New returns a registry with the ledger collector over pool and the Go
// runtime collectors.
func New(pool *pgxpool.Pool, logger *slog.Logger) *Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(&ledgerCollector{pool: pool, log: logger})
	return &Registry{reg: reg}
}

// MustRegister adds component collectors (counters, histograms).
func (r *Registry) MustRegister(cs ...prometheus.Collector) { r.reg.MustRegister(cs...) }

// Handler serves /metrics.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})
}

var (
	operationsDesc = prometheus.NewDesc("actledger_operations", "Operations in the ledger by state.", []string{"state"}, nil)
	backlogDesc    = prometheus.NewDesc("actledger_outbox_backlog", "Outbox rows not yet published to JetStream.", nil, nil)
	lagDesc        = prometheus.NewDesc("actledger_relay_lag_seconds", "Age of the oldest unpublished outbox row.", nil, nil)
)

const operationsByState = `SELECT status, count(*) FROM operations GROUP BY status`

type ledgerCollector struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

func (c *ledgerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- operationsDesc
	ch <- backlogDesc
	ch <- lagDesc
}

func (c *ledgerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts := make(map[ledger.Status]float64, len(ledger.Statuses))
	rows, err := c.pool.Query(ctx, operationsByState)
	if err == nil {
		for rows.Next() {
			var s ledger.Status
			var n int64
			if err = rows.Scan(&s, &n); err != nil {
				break
			}
			counts[s] = float64(n)
		}
		rows.Close()
		err = rows.Err()
	}
	if err != nil {
		c.log.WarnContext(ctx, "metrics: count operations", "err", err)
		return
	}
	for _, s := range ledger.Statuses {
		ch <- prometheus.MustNewConstMetric(operationsDesc, prometheus.GaugeValue, counts[s], string(s))
	}
	backlog, lag, err := outbox.Backlog(ctx, c.pool)
	if err != nil {
		c.log.WarnContext(ctx, "metrics: outbox backlog", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(backlog))
	ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, lag.Seconds())
}
