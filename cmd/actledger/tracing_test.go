package main

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receivedSpan is one span an OTLP receiver decoded, with the service
// that exported it.
type receivedSpan struct {
	service, name, traceID, spanID, parentID string
}

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each
// ExportTraceServiceRequest (protobuf, gzip or not) sent to /v1/traces.
type otlpReceiver struct {
	URL   string
	mu    sync.Mutex
	spans []receivedSpan
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.Error(w, "not an OTLP trace export", http.StatusNotFound)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		raw, err := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &req)
		}
		if err != nil {
			t.Errorf("OTLP receiver: undecodable export: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			service := ""
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					rc.spans = append(rc.spans, receivedSpan{service: service, name: s.GetName(),
						traceID: hex.EncodeToString(s.GetTraceId()), spanID: hex.EncodeToString(s.GetSpanId()), parentID: hex.EncodeToString(s.GetParentSpanId())})
				}
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	rc.URL = srv.URL
	return rc
}

// trace is the spans received of trace id.
func (rc *otlpReceiver) trace(id string) []receivedSpan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []receivedSpan
	for _, s := range rc.spans {
		if s.traceID == id {
			out = append(out, s)
		}
	}
	return out
}

// TestServeExportsOneTraceAcrossTheAPIAndDispatcherProcesses: `serve
// --roles api` and `serve --roles relay,dispatcher,reconciler`, two
// processes with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an OTLP/HTTP
// receiver, export the spans of one operation under one trace id, the
// operation view's trace_id: the request and the enqueue from the API
// process, the publish, the dispatch, the claim, the provider call and
// the result from the other, each dispatch span a child of the publish
// span the relay sent in the message. The supplier received the provider
// call's span as traceparent, in that trace.
func TestServeExportsOneTraceAcrossTheAPIAndDispatcherProcesses(t *testing.T) {
	t.Parallel()
	in := prepareServe(t, nil)
	rc := newOTLPReceiver(t)
	otel := func(service string) []string {
		return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rc.URL, "OTEL_SERVICE_NAME=" + service, "OTEL_BSP_SCHEDULE_DELAY=50"}
	}
	stopAPI := startServeProcess(t, in, "api", otel("actledger-api")...).stop
	stopWorker := startServeProcess(t, in, "relay,dispatcher,reconciler", otel("actledger-worker")...).stop

	approver, agent := in.token(t, "approver"), in.token(t, "agent")
	approval := post(t, in.base+"/v1/approvals", approver, `{"action":"supplier.create_order","params":{"sku":"T-1"},"ttl_seconds":600,"policy_version":"p1"}`)
	op := post(t, in.base+"/v1/operations", agent, fmt.Sprintf(`{"action":"supplier.create_order","key":"po-otlp","params":{"sku":"T-1"},"approval_id":%q}`, approval["id"]))
	done := in.waitStatus(t, agent, op["id"].(string), "succeeded")
	traceID, _ := done["trace_id"].(string)
	if len(traceID) != 32 || op["trace_id"] != traceID {
		t.Fatalf("trace_id %v at creation, %v once succeeded: want one 32-digit trace id", op["trace_id"], done["trace_id"])
	}
	// Stopping flushes what each process still batches.
	stopAPI()
	stopWorker()

	spans := rc.trace(traceID)
	byName := map[string]receivedSpan{}
	for _, s := range spans {
		byName[s.name] = s
	}
	var listing strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&listing, "  %s: %s span %s parent %s\n", s.service, s.name, s.spanID, s.parentID)
	}
	t.Logf("trace %s as the receiver decoded it:\n%s", traceID, listing.String())
	for _, want := range []struct{ name, service, parent string }{
		{"POST /v1/operations", "actledger-api", ""},
		{"enqueue", "actledger-api", "POST /v1/operations"},
		{"publish " + in.prefix + ".ops.acme", "actledger-worker", "enqueue"},
		{"dispatch acme", "actledger-worker", "publish " + in.prefix + ".ops.acme"},
		{"claim", "actledger-worker", "dispatch acme"},
		{"provider create", "actledger-worker", "dispatch acme"},
		{"record", "actledger-worker", "dispatch acme"},
	} {
		s, ok := byName[want.name]
		switch {
		case !ok:
			t.Errorf("no span %q in trace %s; received:\n%s", want.name, traceID, listing.String())
		case s.service != want.service:
			t.Errorf("span %q exported by %q, want %q", want.name, s.service, want.service)
		case want.parent == "" && s.parentID != "":
			t.Errorf("span %q has parent %s, want none", want.name, s.parentID)
		case want.parent != "" && s.parentID != byName[want.parent].spanID:
			t.Errorf("span %q has parent %s, want %q (%s); received:\n%s", want.name, s.parentID, want.parent, byName[want.parent].spanID, listing.String())
		}
	}
	call := byName["provider create"]
	wantHeader := "00-" + traceID + "-" + call.spanID + "-01"
	if got := in.traceparents.Values(); len(got) != 1 || got[0] != wantHeader {
		t.Errorf("the supplier received traceparent %q, want one request with %q", got, wantHeader)
	}
}
