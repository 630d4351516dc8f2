package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of actledger's own spans.
const ScopeName = "github.com/actledger/actledger"

// ServiceName is the service.name of exported spans unless
// OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const ServiceName = "actledger"

// The span attributes of an operation's steps.
const (
	OperationID = attribute.Key("actledger.operation.id")
	Tenant      = attribute.Key("actledger.tenant")
	Action      = attribute.Key("actledger.action")
	Provider    = attribute.Key("actledger.provider")
	Attempt     = attribute.Key("actledger.attempt")
	// Outcome is a provider call's outcome class (provider.Class).
	Outcome = attribute.Key("actledger.outcome")
	// State is the operation's state after the step.
	State = attribute.Key("actledger.state")
)

// Propagator is the W3C Trace Context propagator: the context travels as a
// lower-case traceparent (and tracestate) header, the same in HTTP requests,
// NATS messages and the ledger.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Enabled reports whether getenv configures an OTLP trace exporter: an
// endpoint is set (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT), OTEL_TRACES_EXPORTER is not "none" and
// OTEL_SDK_DISABLED is not "true".
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// ErrExporter is returned by Setup for an OTEL_TRACES_EXPORTER other than
// otlp or none: only OTLP is built in.
var ErrExporter = errors.New("tracing: OTEL_TRACES_EXPORTER must be otlp or none")

// ErrProtocol is returned by Setup for an OTLP protocol other than
// http/protobuf: the exporter speaks OTLP over HTTP, not gRPC.
var ErrProtocol = errors.New("tracing: only OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf is supported")

// Setup builds the process's tracer provider from the standard OTEL_*
// variables read by getenv. Unless Enabled, it returns nil and a shutdown
// that does nothing: no exporter runs, and components fall back to the
// no-op global provider. Otherwise spans are batched and exported over
// OTLP/HTTP (protobuf); the exporter itself reads the OTEL_EXPORTER_OTLP_*
// variables (endpoint, headers, timeout, compression, certificates) from
// the process environment, the sampler comes from OTEL_TRACES_SAMPLER
// (default: parent-based, always on), the batching from OTEL_BSP_*, and
// the resource from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// (default service.name "actledger"). shutdown flushes the spans still
// batched; call it after the process stopped its work.
func Setup(ctx context.Context, getenv func(string) string) (_ *sdktrace.TracerProvider, shutdown func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	if exp := getenv("OTEL_TRACES_EXPORTER"); exp != "" && !strings.EqualFold(exp, "otlp") && !strings.EqualFold(exp, "none") {
		return nil, none, fmt.Errorf("%w, got %q", ErrExporter, exp)
	}
	if !Enabled(getenv) {
		return nil, none, nil
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(name); p != "" {
			if p != "http/protobuf" {
				return nil, none, fmt.Errorf("%w, %s is %q", ErrProtocol, name, p)
			}
			break
		}
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, none, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", ServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, none, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// Tracer is actledger's tracer of tp; nil is otel's global provider.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(ScopeName)
}

// traceparentCarrier holds one traceparent header for the propagator.
type traceparentCarrier struct{ value string }

const traceparentHeader = "traceparent"

func (c *traceparentCarrier) Get(key string) string {
	if key == traceparentHeader {
		return c.value
	}
	return ""
}

func (c *traceparentCarrier) Set(key, value string) {
	if key == traceparentHeader {
		c.value = value
	}
}

func (c *traceparentCarrier) Keys() []string { return []string{traceparentHeader} }

// Traceparent is the W3C traceparent of the span in ctx, "" when ctx holds
// no valid span context (tracing off, and no caller's context): then
// nothing is formatted and nothing need be stored.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	var c traceparentCarrier
	Propagator.Inject(ctx, &c)
	return c.value
}

// Context returns ctx with the remote span context of traceparent as the
// parent of the spans started from it; ctx itself when traceparent is
// empty or not a valid W3C traceparent.
func Context(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return Propagator.Extract(ctx, &traceparentCarrier{value: traceparent})
}

// TraceID is the trace id (32 hex digits) of a W3C traceparent, "" when
// traceparent is not one.
func TraceID(traceparent string) string {
	sc := trace.SpanContextFromContext(Context(context.Background(), traceparent))
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// Header is the W3C trace context header, lower-case, as it is sent in
// NATS messages and HTTP requests.
const Header = traceparentHeader

// Start starts a span of tracer named name as a child of the span in ctx,
// and only when ctx is in a trace: otherwise it returns ctx and the span
// already there (a no-op one), so a step of an operation without a trace
// context costs nothing. End the returned span as any other.
func Start(ctx context.Context, tracer trace.Tracer, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracer.Start(ctx, name, opts...)
}
