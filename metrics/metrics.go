// Package metrics exposes actledger's state in the Prometheus text format.
//
// Gauges that describe the ledger (operations by state, outbox backlog and
// lag) are read from Postgres at scrape time, so every process reports the
// same truth and nothing drifts; each reads a bounded amount (operations by
// state come from counts kept by trigger, the backlog and review queries
// from partial indexes of open work); counters of events seen by one process live
// with the component that counts them and register here.
//
// A scrape must never write: the counts' deltas are folded by a Folder on
// a timer, not by the collector, so no request to /metrics (which the API
// serves to metrics tokens only) changes the database.
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
	"github.com/actledger/actledger/provider"
)

// Registry holds actledger's collectors.
type Registry struct {
	reg             *prometheus.Registry
	attempts        *prometheus.CounterVec
	webhooksRefused *prometheus.CounterVec
	decisions       *prometheus.CounterVec
}

// New returns a registry with the ledger collector over pool and the Go
// runtime collectors.
func New(pool *pgxpool.Pool, logger *slog.Logger) *Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(&ledgerCollector{pool: pool, log: logger}, &circuitCollector{pool: pool, log: logger},
		&statementCollector{pool: pool, log: logger},
		&notificationCollector{pool: pool, log: logger})
	r := &Registry{
		reg: reg,
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "actledger_provider_attempts_total",
			Help: "Provider create attempts by this process, by provider and response class.",
		}, []string{"provider", "class"}),
		webhooksRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "actledger_webhook_verifications_failed_total",
			Help: "Webhooks refused by this process because their signature failed, by provider and reason.",
		}, []string{"provider", "reason"}),
	}
	r.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "actledger_approval_decisions_total",
		Help: "Decisions on approval requests made by this process, by outcome (approved_by_person, approved_by_policy, denied, expired).",
	}, []string{"outcome"})
	for _, o := range []ApprovalOutcome{ApprovedByPerson, ApprovedByPolicy, Denied, Expired} {
		r.decisions.WithLabelValues(string(o))
	}
	reg.MustRegister(r.attempts, r.webhooksRefused, r.decisions)
	return r
}

// ApprovalOutcome is how an approval request ended.
type ApprovalOutcome string

// The outcomes of actledger_approval_decisions_total.
const (
	ApprovedByPerson ApprovalOutcome = "approved_by_person"
	ApprovedByPolicy ApprovalOutcome = "approved_by_policy"
	Denied           ApprovalOutcome = "denied"
	Expired          ApprovalOutcome = "expired"
)

// ApprovalDecision counts one decided approval request; pass it as
// api.Config.OnApprovalDecision.
func (r *Registry) ApprovalDecision(outcome ApprovalOutcome) {
	r.decisions.WithLabelValues(string(outcome)).Inc()
}

// ApprovalRequestsExpired counts n proposals held because nobody decided
// them in time; pass it as dispatcher.SweeperConfig.OnRequestsExpired.
func (r *Registry) ApprovalRequestsExpired(n int) {
	r.decisions.WithLabelValues(string(Expired)).Add(float64(n))
}

// Attempt counts one provider attempt; pass it as dispatcher.Config.OnAttempt.
func (r *Registry) Attempt(providerName string, class provider.Class) {
	r.attempts.WithLabelValues(providerName, string(class)).Inc()
}

// WebhookRefused counts a webhook whose signature failed; pass it as
// api.Config.OnWebhookRejected.
func (r *Registry) WebhookRefused(providerName, reason string) {
	r.webhooksRefused.WithLabelValues(providerName, reason).Inc()
}

// Handler serves /metrics.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})
}

var (
	operationsDesc = prometheus.NewDesc("actledger_operations", "Operations in the ledger by state.", []string{"state"}, nil)
	// prunedDesc counts what retention took out of actledger_operations:
	// the operations made in a state are the gauge plus this counter.
	prunedDesc     = prometheus.NewDesc("actledger_operations_pruned_total", "Operations archived and deleted by retention, by the state they ended in.", []string{"state"}, nil)
	backlogDesc    = prometheus.NewDesc("actledger_outbox_backlog", "Outbox rows not yet published to JetStream.", nil, nil)
	lagDesc        = prometheus.NewDesc("actledger_relay_lag_seconds", "Age of the oldest unpublished outbox row.", nil, nil)
	reviewOpenDesc = prometheus.NewDesc("actledger_review_open", "Open review items, by kind (operation or unmatched_evidence).", []string{"kind"}, nil)
	reviewAgeDesc  = prometheus.NewDesc("actledger_review_oldest_age_seconds", "Age of the oldest open review item, by kind.", []string{"kind"}, nil)
	behindDesc     = prometheus.NewDesc("actledger_ledger_behind", "1 while dispatch is paused because a message named an operation or a version the ledger does not hold (committed work lost in a failover or a restore), else 0.", nil, nil)
	requestsDesc   = prometheus.NewDesc("actledger_approval_requests_open", "Proposals waiting for a person to approve or deny them.", nil, nil)
	requestAgeDesc = prometheus.NewDesc("actledger_approval_request_oldest_age_seconds", "Age of the oldest proposal waiting for a decision.", nil, nil)
)

// approvalRequestsOpen counts open proposals and the age of the oldest,
// from the partial index of schema/012_approval_requests.sql.
const approvalRequestsOpen = `SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
FROM operations WHERE status = 'awaiting_approval'`

// reviewOpen counts open review items and the age of the oldest, by kind.
const reviewOpen = `SELECT 'operation', count(*), coalesce(extract(epoch FROM now() - min(updated_at)), 0)
FROM operations WHERE status = 'review'
UNION ALL
SELECT 'unmatched_evidence', count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)
FROM unmatched_evidence WHERE resolved_at IS NULL`

// Operations by state come from the counts schema/011_operation_counts.sql
// (per tenant and scope since schema/032_operation_counts_by_scope.sql)
// keeps by trigger, never from counting the ledger: a scan of every
// operation ever made, on every scrape of every process. Reading costs the
// few folded rows plus the deltas since the last fold (Folder, on a
// timer).
const (
	// operationCountsFold moves the deltas into operation_counts. DELETE …
	// RETURNING makes two collectors folding at once each fold the deltas
	// it deleted, never the same one twice.
	operationCountsFold = `WITH moved AS (DELETE FROM operation_count_deltas RETURNING tenant_id, scope, status, delta)
INSERT INTO operation_counts (tenant_id, scope, status, n)
SELECT tenant_id, scope, status, sum(delta) FROM moved GROUP BY tenant_id, scope, status
ON CONFLICT (tenant_id, scope, status) DO UPDATE SET n = operation_counts.n + EXCLUDED.n`

	// operationsByState is the folded counts plus the deltas not folded
	// yet, read in one snapshot: a fold commits both sides at once.
	operationsByState = `SELECT status, sum(n)::bigint FROM (
    SELECT status, n FROM operation_counts
    UNION ALL
    SELECT status, delta FROM operation_count_deltas
) c GROUP BY status`
)

type ledgerCollector struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

func (c *ledgerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- operationsDesc
	ch <- prunedDesc
	ch <- backlogDesc
	ch <- lagDesc
	ch <- reviewOpenDesc
	ch <- reviewAgeDesc
	ch <- requestsDesc
	ch <- behindDesc
	ch <- requestAgeDesc
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
	pruned, err := ledger.PrunedCounts(ctx, c.pool)
	if err != nil {
		c.log.WarnContext(ctx, "metrics: pruned operations", "err", err)
		return
	}
	for _, s := range ledger.Statuses {
		if s.Terminal() {
			ch <- prometheus.MustNewConstMetric(prunedDesc, prometheus.CounterValue, float64(pruned[s]), string(s))
		}
	}
	backlog, lag, err := ledger.OutboxBacklog(ctx, c.pool)
	if err != nil {
		c.log.WarnContext(ctx, "metrics: outbox backlog", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(backlog))
	ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, lag.Seconds())

	behind, err := ledger.IsLedgerBehind(ctx, c.pool)
	if err != nil {
		c.log.WarnContext(ctx, "metrics: ledger behind", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(behindDesc, prometheus.GaugeValue, map[bool]float64{false: 0, true: 1}[behind])

	var open int64
	var oldest float64
	if err := c.pool.QueryRow(ctx, approvalRequestsOpen).Scan(&open, &oldest); err != nil {
		c.log.WarnContext(ctx, "metrics: approval requests", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.GaugeValue, float64(open))
	ch <- prometheus.MustNewConstMetric(requestAgeDesc, prometheus.GaugeValue, oldest)

	rows, err = c.pool.Query(ctx, reviewOpen)
	if err != nil {
		c.log.WarnContext(ctx, "metrics: review items", "err", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var n int64
		var age float64
		if err := rows.Scan(&kind, &n, &age); err != nil {
			c.log.WarnContext(ctx, "metrics: review items", "err", err)
			return
		}
		ch <- prometheus.MustNewConstMetric(reviewOpenDesc, prometheus.GaugeValue, float64(n), kind)
		ch <- prometheus.MustNewConstMetric(reviewAgeDesc, prometheus.GaugeValue, age, kind)
	}
}
