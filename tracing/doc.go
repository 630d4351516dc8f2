// Package tracing is actledger's OpenTelemetry tracing: the one place that
// decides whether traces are exported (Setup, from the standard OTEL_*
// variables), the W3C trace context an operation keeps in the ledger and
// its outbox rows (Traceparent, Context), and the span attributes every
// component uses, so that one operation's steps, in whichever process they
// run, form one trace.
//
// Components take a trace.TracerProvider in their Config; nil is otel's
// global provider, a no-op unless a program sets one. With a no-op
// provider and no incoming context a span is invalid, Traceparent is "",
// and nothing is stored or sent.
//
// Attributes name the operation (id, tenant, action, provider, attempt,
// outcome class, state) and never carry params, supplier answers, tokens
// or credentials.
package tracing
