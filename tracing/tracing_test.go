package tracing_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/actledger/actledger/tracing"
)

func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestSetupExportsOnlyWhenAnOTLPEndpointIsSet: without an endpoint, or
// with tracing turned off, Setup builds nothing; an exporter or protocol
// it does not have stops it with an error rather than exporting nowhere.
func TestSetupExportsOnlyWhenAnOTLPEndpointIsSet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		env     map[string]string
		enabled bool
		err     error
	}{
		{name: "unset", env: nil},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, enabled: true},
		{name: "traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, enabled: true},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{name: "sdk disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}},
		{name: "http/protobuf", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, enabled: true},
		{name: "grpc refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: tracing.ErrProtocol},
		{name: "console refused", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, err: tracing.ErrExporter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tp, shutdown, err := tracing.Setup(context.Background(), envOf(tc.env))
			if !errors.Is(err, tc.err) {
				t.Fatalf("Setup: %v, want %v", err, tc.err)
			}
			if got := tp != nil; got != tc.enabled {
				t.Errorf("Setup built a provider: %v, want %v", got, tc.enabled)
			}
			if err := shutdown(context.Background()); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
	}
}

// TestTraceparentRoundTrips: the context a traceparent names is the one
// Traceparent formats again, and TraceID reads its trace; anything that
// is not a W3C traceparent names none.
func TestTraceparentRoundTrips(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := tracing.Context(context.Background(), tp)
	if got := tracing.Traceparent(ctx); got != tp {
		t.Errorf("Traceparent = %q, want %q", got, tp)
	}
	if got := tracing.TraceID(tp); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("TraceID = %q", got)
	}
	for _, bad := range []string{"", "00-zz-00f067aa0ba902b7-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		if got := tracing.TraceID(bad); got != "" {
			t.Errorf("TraceID(%q) = %q, want empty", bad, got)
		}
		if sc := trace.SpanContextFromContext(tracing.Context(context.Background(), bad)); sc.IsValid() {
			t.Errorf("Context(%q) holds a valid span context", bad)
		}
	}
}

// TestStartOutsideATraceMakesNoSpan: a step of an operation that is in
// no trace costs no allocation and gets no span.
func TestStartOutsideATraceMakesNoSpan(t *testing.T) {
	tracer := tracing.Tracer(nil)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, span := tracing.Start(ctx, tracer, "step")
		if tracing.Traceparent(c) != "" {
			t.Fatal("a traceparent outside a trace")
		}
		span.End()
	})
	if allocs != 0 {
		t.Errorf("Start outside a trace allocates %v times, want 0", allocs)
	}
}
