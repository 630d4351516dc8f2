// Package notify delivers actledger's notifications to the receivers of
// the providers file's notifications: key, signed as Standard Webhooks.
//
// The ledger writes each event (approval.requested, review.opened,
// operation.settled) in the transaction of the change that causes it, with
// its outbox row, when a receiver of the operation's tenant subscribes to
// it; the relay publishes the row to the notification stream. Worker takes
// the messages with one durable consumer per receiver, so a slow, dead or
// redirecting receiver holds up only its own deliveries, never an
// operation and never another receiver; each receiver has a bounded number
// of requests in flight (Config.Concurrency).
//
// A message is a pointer: the body is built from the ledger (ids and
// words, never params or supplier answers). The event's id is the
// webhook-id of every attempt, so a receiver drops repeats; every attempt
// is signed afresh (webhook-timestamp is the attempt's). A failed attempt
// is retried with backoff until Config.RetryFor has passed since the
// event, then given up: a log line and a row in the ledger, which every
// process's /metrics (actledger_notifications_failed_total{receiver}) and
// the console read. Redirects are never
// followed.
//
// An event whose message JetStream lost (or whose consumer state was lost)
// is published again by the worker's sweep (ledger.Store.RepublishStalled)
// once no waiting receiver had an attempt within Config.StallAfter; the
// receivers already done with it are not sent it again.
package notify
