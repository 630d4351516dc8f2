package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/actledger/actledger/ledger"
)

var notificationsFailedDesc = prometheus.NewDesc("actledger_notifications_failed_total",
	"Notifications given up after their retry window, by receiver (from the ledger, the same in every process).",
	[]string{"receiver"}, nil)

// notificationCollector reports given-up notifications from the ledger:
// the worker that gave one up may run in another process than the one
// scraped.
type notificationCollector struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

func (c *notificationCollector) Describe(ch chan<- *prometheus.Desc) { ch <- notificationsFailedDesc }

func (c *notificationCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	failures, err := ledger.NotificationFailures(ctx, c.pool, uuid.Nil)
	if err != nil {
		c.log.WarnContext(ctx, "metrics: failed notifications", "err", err)
		return
	}
	for _, f := range failures {
		ch <- prometheus.MustNewConstMetric(notificationsFailedDesc, prometheus.CounterValue, float64(f.Failed), f.Receiver)
	}
}
