package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/internal/testpoll"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/tracing"
)

// secretSKU is a param value no span may carry.
const secretSKU = "TRACE-SKU-4711"

// tracedPipeline is a started pipeline whose process exports its spans to
// an in-memory exporter, synchronously as each ends.
func tracedPipeline(t *testing.T, opts testpipeline.Options) (*testpipeline.Pipeline, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	opts.TracerProvider = tp
	p := testpipeline.New(t, opts)
	p.Start(1)
	return p, exp
}

// spanTree is the ended spans of one trace, by span id.
type spanTree map[trace.SpanID]tracetest.SpanStub

// waitTrace waits until the exporter holds an ended span of each name in
// trace id, and returns the trace.
func waitTrace(t *testing.T, exp *tracetest.InMemoryExporter, id trace.TraceID, names ...string) spanTree {
	t.Helper()
	var tree spanTree
	testpoll.Until(t, 15*time.Second, func() error {
		tree = spanTree{}
		have := map[string]bool{}
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID() == id {
				tree[s.SpanContext.SpanID()] = s
				have[s.Name] = true
			}
		}
		missing := []string{}
		for _, n := range names {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("trace %s has no span %v; it has:\n%s", id, missing, tree)
		}
		return nil
	})
	return tree
}

// one is the only span named name; it fails the test when there is not
// exactly one.
func (tr spanTree) one(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range tr {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1; the trace:\n%s", len(found), name, tr)
	}
	return found[0]
}

// parentOf is the name of s's parent in the trace ("" for a root or a
// remote parent).
func (tr spanTree) parentOf(s tracetest.SpanStub) string {
	return tr[s.Parent.SpanID()].Name
}

// String renders the trace as an indented tree with each span's kind
// and attributes: the failure messages' (and a reader's) view of it.
func (tr spanTree) String() string {
	children := map[trace.SpanID][]tracetest.SpanStub{}
	var roots []tracetest.SpanStub
	for _, s := range tr {
		if _, ok := tr[s.Parent.SpanID()]; ok {
			children[s.Parent.SpanID()] = append(children[s.Parent.SpanID()], s)
		} else {
			roots = append(roots, s)
		}
	}
	var b strings.Builder
	var walk func(s tracetest.SpanStub, depth int)
	walk = func(s tracetest.SpanStub, depth int) {
		attrs := make([]string, 0, len(s.Attributes))
		for _, a := range s.Attributes {
			if strings.HasPrefix(string(a.Key), "actledger.") || a.Key == "http.response.status_code" || a.Key == "messaging.destination.name" {
				attrs = append(attrs, fmt.Sprintf("%s=%s", strings.TrimPrefix(string(a.Key), "actledger."), a.Value.String()))
			}
		}
		sort.Strings(attrs)
		parent := "root"
		if s.Parent.IsValid() {
			parent = "parent " + s.Parent.SpanID().String()
			if s.Parent.IsRemote() {
				parent = "remote " + parent
			}
		}
		fmt.Fprintf(&b, "%s%s [%s, %s, span %s] %s\n", strings.Repeat("  ", depth), s.Name, s.SpanKind, parent, s.SpanContext.SpanID(), strings.Join(attrs, " "))
		kids := children[s.SpanContext.SpanID()]
		sort.Slice(kids, func(i, j int) bool { return kids[i].StartTime.Before(kids[j].StartTime) })
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	sort.Slice(roots, func(i, j int) bool { return roots[i].StartTime.Before(roots[j].StartTime) })
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}

// attr is the value of s's attribute key, "" when it has none.
func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}

// assertCarriesNone fails when any span of the trace carries one of the
// secrets: in its name, status, attributes, events or links.
func (tr spanTree) assertCarriesNone(t *testing.T, secrets ...string) {
	t.Helper()
	for _, s := range tr {
		text := []string{s.Name, s.Status.Description}
		for _, a := range s.Attributes {
			text = append(text, string(a.Key), a.Value.String())
		}
		for _, e := range s.Events {
			text = append(text, e.Name)
			for _, a := range e.Attributes {
				text = append(text, a.Value.String())
			}
		}
		for _, l := range s.Links {
			for _, a := range l.Attributes {
				text = append(text, a.Value.String())
			}
		}
		for _, secret := range secrets {
			for _, x := range text {
				if strings.Contains(x, secret) {
					t.Errorf("span %q carries %q (in %q)", s.Name, secret, x)
				}
			}
		}
	}
}

// traceIDOf is the trace id the operation's view names.
func traceIDOf(t *testing.T, p *testpipeline.Pipeline, op ledger.Operation) trace.TraceID {
	t.Helper()
	status, view := p.Do("GET", "/v1/operations/"+op.ID.String(), p.Agent, "")
	if status != http.StatusOK {
		t.Fatalf("GET operation: %d %v", status, view)
	}
	s, _ := view["trace_id"].(string)
	id, err := trace.TraceIDFromHex(s)
	if err != nil {
		t.Fatalf("operation view trace_id %v: %v", view["trace_id"], err)
	}
	return id
}

// TestOneOperationIsOneTraceFromTheRequestToTheSupplier drives one
// operation through the real pipeline (HTTP, Postgres, JetStream,
// dispatcher, supplier) and holds its spans to one tree: the request's
// span is the parent of the enqueue, the relay's publish is the enqueue's
// child, the dispatch the publish's, and the claim, the provider call and
// the recording of the result the dispatch's. The supplier received the
// provider call's context as traceparent, and the view names the trace.
// No span carries the params, the agent's token or the webhook secret.
// The console's operation page shows the trace id.
func TestOneOperationIsOneTraceFromTheRequestToTheSupplier(t *testing.T) {
	t.Parallel()
	p, exp := tracedPipeline(t, testpipeline.Options{})
	params := fmt.Sprintf(`{"sku":%q,"qty":2}`, secretSKU)
	op := p.Enqueue("po-traced", params)
	op = p.WaitStatus(op, ledger.StatusSucceeded, 15*time.Second)

	id := traceIDOf(t, p, op)
	tr := waitTrace(t, exp, id, "POST /v1/operations", "enqueue", "publish "+p.Broker.DispatchSubject("acme"), "dispatch acme", "claim", "provider create", "record")
	t.Logf("span tree of operation %s:\n%s", op.ID, tr)

	request := tr.one(t, "POST /v1/operations")
	if request.SpanKind != trace.SpanKindServer || request.Parent.IsValid() {
		t.Errorf("request span: kind %s, parent %v; want a server span at the root", request.SpanKind, request.Parent.SpanID())
	}
	for _, edge := range []struct{ child, parent string }{
		{"enqueue", "POST /v1/operations"},
		{"publish " + p.Broker.DispatchSubject("acme"), "enqueue"},
		{"dispatch acme", "publish " + p.Broker.DispatchSubject("acme")},
		{"claim", "dispatch acme"},
		{"provider create", "dispatch acme"},
		{"record", "dispatch acme"},
	} {
		if got := tr.parentOf(tr.one(t, edge.child)); got != edge.parent {
			t.Errorf("span %q has parent %q, want %q", edge.child, got, edge.parent)
		}
	}
	for name, want := range map[string]map[string]string{
		"enqueue":         {"actledger.operation.id": op.ID.String(), "actledger.tenant": p.Tenant, "actledger.action": testpipeline.Action, "actledger.provider": "acme", "actledger.state": "queued"},
		"claim":           {"actledger.operation.id": op.ID.String(), "actledger.state": "dispatching", "actledger.claimed": "true"},
		"dispatch acme":   {"actledger.operation.id": op.ID.String(), "actledger.tenant": p.Tenant, "actledger.attempt": "1", "actledger.outcome": "succeeded", "actledger.state": "succeeded"},
		"provider create": {"actledger.provider": "acme", "actledger.outcome": "succeeded", "http.response.status_code": "201"},
		"record":          {"actledger.operation.id": op.ID.String(), "actledger.state": "succeeded", "actledger.attempt": "1"},
	} {
		s := tr.one(t, name)
		for k, v := range want {
			if got := attr(s, k); got != v {
				t.Errorf("span %q: %s = %q, want %q", name, k, got, v)
			}
		}
	}
	if k := tr.one(t, "provider create").SpanKind; k != trace.SpanKindClient {
		t.Errorf("provider create is a %s span, want client", k)
	}

	call := tr.one(t, "provider create").SpanContext
	want := fmt.Sprintf("00-%s-%s-01", call.TraceID(), call.SpanID())
	if got := p.Traceparents.Values(); len(got) != 1 || got[0] != want {
		t.Errorf("the supplier received traceparent %q, want one request with %q", got, want)
	}
	tr.assertCarriesNone(t, secretSKU, p.Agent, testpipeline.WebhookSecret)

	// The console's operation page names the trace too.
	req, _ := http.NewRequest("GET", p.API.URL+"/console/operations/"+op.ID.String(), nil)
	req.AddCookie(p.ConsoleCookie(p.Operator))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !bytes.Contains(page, []byte(`<code class="trace-id">`+id.String()+`</code>`)) {
		t.Errorf("console operation page: %d, without trace id %s", res.StatusCode, id)
	}
}

// TestAProposalIsOneTraceFromItsRequestToTheSupplier: a proposal
// (request_approval) has the same tree as an approved operation: the
// request's span is the parent of the enqueue (state awaiting_approval),
// and once a person approves it the publish, the dispatch and the
// provider call descend from that enqueue, in the trace its view names.
func TestAProposalIsOneTraceFromItsRequestToTheSupplier(t *testing.T) {
	t.Parallel()
	p, exp := tracedPipeline(t, testpipeline.Options{})
	status, out := p.Propose("po-proposed-trace", `{"sku":"P-1","qty":1}`)
	if status != http.StatusAccepted {
		t.Fatalf("propose: %d %v", status, out)
	}
	op := p.Operation(out)
	status, out = p.Do("POST", "/v1/operations/"+op.ID.String()+"/approve", p.Approver,
		fmt.Sprintf(`{"params_fingerprint":%q,"note":"ok"}`, op.ParamsFingerprint))
	if status != http.StatusOK {
		t.Fatalf("approve: %d %v", status, out)
	}
	op = p.WaitStatus(op, ledger.StatusSucceeded, 15*time.Second)

	publish := "publish " + p.Broker.DispatchSubject("acme")
	tr := waitTrace(t, exp, traceIDOf(t, p, op), "POST /v1/operations", "enqueue", publish, "dispatch acme", "provider create")
	for _, edge := range []struct{ child, parent string }{
		{"enqueue", "POST /v1/operations"},
		{publish, "enqueue"},
		{"dispatch acme", publish},
		{"provider create", "dispatch acme"},
	} {
		if got := tr.parentOf(tr.one(t, edge.child)); got != edge.parent {
			t.Errorf("span %q has parent %q, want %q:\n%s", edge.child, got, edge.parent, tr)
		}
	}
	if got := attr(tr.one(t, "enqueue"), "actledger.state"); got != string(ledger.StatusAwaitingApproval) {
		t.Errorf("the proposal's enqueue span has state %q, want awaiting_approval", got)
	}
}

// TestAnAgentsTraceparentIsTheParentOfItsOperation: an agent that sends
// traceparent with POST /v1/operations, or as _meta.traceparent of an MCP
// tools/call, finds the operation in its own trace: the request's span
// (the tool call's) is a child of the agent's span, and the view's
// trace_id is the agent's trace id.
func TestAnAgentsTraceparentIsTheParentOfItsOperation(t *testing.T) {
	t.Parallel()
	p, exp := tracedPipeline(t, testpipeline.Options{})

	t.Run("http header", func(t *testing.T) {
		agentTrace, agentSpan := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		a := p.Approve(`{"sku":"A-1"}`, time.Hour)
		req, _ := http.NewRequest("POST", p.API.URL+"/v1/operations",
			strings.NewReader(fmt.Sprintf(`{"action":%q,"key":"po-agent-trace","params":{"sku":"A-1"},"approval_id":%q}`, testpipeline.Action, a.ID)))
		req.Header.Set("Authorization", "Bearer "+p.Agent)
		req.Header.Set("traceparent", "00-"+agentTrace+"-"+agentSpan+"-01")
		out := doJSON(t, req, http.StatusCreated)
		if out["trace_id"] != agentTrace {
			t.Errorf("trace_id = %v, want the agent's %s", out["trace_id"], agentTrace)
		}
		id, _ := trace.TraceIDFromHex(agentTrace)
		tr := waitTrace(t, exp, id, "POST /v1/operations", "enqueue", "provider create")
		request := tr.one(t, "POST /v1/operations")
		if !request.Parent.IsRemote() || request.Parent.SpanID().String() != agentSpan {
			t.Errorf("request span's parent is %v (remote %v), want the agent's span %s", request.Parent.SpanID(), request.Parent.IsRemote(), agentSpan)
		}
	})

	t.Run("mcp _meta", func(t *testing.T) {
		agentTrace, agentSpan := "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
		a := p.Approve(`{"sku":"M-1"}`, time.Hour)
		cs := mcpSession(t, p)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{
			Meta: sdk.Meta{"traceparent": "00-" + agentTrace + "-" + agentSpan + "-01"},
			Name: "supplier_create_order",
			Arguments: map[string]any{
				"key": "po-mcp-trace", "params": map[string]any{"sku": "M-1"}, "approval_id": a.ID.String(),
			},
		})
		if err != nil || res.IsError {
			t.Fatalf("tools/call: %v %+v", err, res)
		}
		id, _ := trace.TraceIDFromHex(agentTrace)
		tr := waitTrace(t, exp, id, "tools/call supplier_create_order", "enqueue", "provider create")
		call := tr.one(t, "tools/call supplier_create_order")
		if !call.Parent.IsRemote() || call.Parent.SpanID().String() != agentSpan {
			t.Errorf("tool call span's parent is %v (remote %v), want the agent's span %s", call.Parent.SpanID(), call.Parent.IsRemote(), agentSpan)
		}
		// The tool call is the request the enqueue belongs to.
		enqueue := tr.one(t, "enqueue")
		for s := enqueue; ; s = tr[s.Parent.SpanID()] {
			if s.Name == call.Name {
				break
			}
			if _, ok := tr[s.Parent.SpanID()]; !ok {
				t.Fatalf("enqueue does not descend from the tool call:\n%s", tr)
			}
		}
	})
}

// TestTheApplyOfAWebhookJoinsTheOperationsTrace: the supplier's webhook
// for an order arrives in a request of its own; the reconciler's apply of
// it is a span of the operation's trace (a child of its enqueue), linked
// to the trace of the webhook's request.
func TestTheApplyOfAWebhookJoinsTheOperationsTrace(t *testing.T) {
	t.Parallel()
	p, exp := tracedPipeline(t, testpipeline.Options{Webhooks: true, WebhookDelay: 50 * time.Millisecond})
	op := p.Enqueue("po-webhook-trace", `{"sku":"W-1"}`)
	op = p.WaitStatus(op, ledger.StatusSucceeded, 15*time.Second)
	id := traceIDOf(t, p, op)
	tr := waitTrace(t, exp, id, "enqueue", "apply evidence")
	apply := tr.one(t, "apply evidence")
	if got := tr.parentOf(apply); got != "enqueue" {
		t.Errorf("apply evidence has parent %q, want enqueue", got)
	}
	if got := attr(apply, "actledger.evidence.source"); got != "webhook" {
		t.Errorf("apply evidence source = %q, want webhook", got)
	}
	if got := attr(apply, "actledger.operation.id"); got != op.ID.String() {
		t.Errorf("apply evidence operation = %q, want %s", got, op.ID)
	}
	if len(apply.Links) != 1 {
		t.Fatalf("apply evidence has %d links, want 1 (the webhook request)", len(apply.Links))
	}
	// The link is the evidence message's context: the relay's publish of
	// it, in the trace of the webhook's request.
	var webhook *tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "POST /v1/webhooks/{provider}" {
			webhook = &s
		}
	}
	if webhook == nil || webhook.SpanContext.TraceID() != apply.Links[0].SpanContext.TraceID() {
		t.Errorf("apply evidence links to trace %s, want the webhook request's (%+v)", apply.Links[0].SpanContext.TraceID(), webhook)
	}
	tr.assertCarriesNone(t, testpipeline.WebhookSecret)
}

// TestWithoutATracerNothingIsStoredOrSent: a pipeline without a tracer
// provider keeps no trace context with the operation or its outbox row,
// sends the supplier no traceparent, and its view's trace_id is null.
func TestWithoutATracerNothingIsStoredOrSent(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	p.Start(1)
	op := p.Enqueue("po-untraced", `{"sku":"U-1"}`)
	op = p.WaitStatus(op, ledger.StatusSucceeded, 15*time.Second)
	if op.Traceparent != nil {
		t.Errorf("operation keeps traceparent %q, want none", *op.Traceparent)
	}
	var rows int
	if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE traceparent IS NOT NULL`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("%d outbox rows carry a trace context, want 0", rows)
	}
	if got := p.Traceparents.Values(); len(got) != 1 || got[0] != "" {
		t.Errorf("the supplier received traceparents %q, want one request without", got)
	}
	status, view := p.Do("GET", "/v1/operations/"+op.ID.String(), p.Agent, "")
	if v, ok := view["trace_id"]; status != http.StatusOK || !ok || v != nil {
		t.Errorf("view: %d, trace_id %v (present %v), want null", status, v, ok)
	}
	if tracing.Traceparent(context.Background()) != "" {
		t.Error("Traceparent of a context without a span is not empty")
	}
}

func doJSON(t *testing.T, req *http.Request, want int) map[string]any {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	if res.StatusCode != want || json.NewDecoder(bytes.NewReader(raw)).Decode(&out) != nil {
		t.Fatalf("%s %s: %d %s, want %d", req.Method, req.URL.Path, res.StatusCode, raw, want)
	}
	return out
}

// bearer adds the agent's token to every MCP request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func mcpSession(t *testing.T, p *testpipeline.Pipeline) *sdk.ClientSession {
	t.Helper()
	transport := &sdk.StreamableClientTransport{
		Endpoint:             p.API.URL + "/mcp",
		HTTPClient:           &http.Client{Transport: bearer{token: p.Agent, next: http.DefaultTransport}},
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestARetryStaysInTheOperationsTrace: a create the supplier refuses with
// 503 is retried from a later outbox row; that row carries the
// operation's trace context too, so the second publish, dispatch and
// provider call are in the same trace, children of the enqueue, and the
// supplier saw the trace on both requests.
func TestARetryStaysInTheOperationsTrace(t *testing.T) {
	t.Parallel()
	p, exp := tracedPipeline(t, testpipeline.Options{})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.UnavailableBeforeCommit, RetryAfterS: 1})
	op := p.Enqueue("po-retry-trace", `{"sku":"R-1"}`)
	op = p.WaitStatus(op, ledger.StatusSucceeded, 15*time.Second)
	id := traceIDOf(t, p, op)
	publish := "publish " + p.Broker.DispatchSubject("acme")
	var tr spanTree
	testpoll.Until(t, 15*time.Second, func() error {
		tr = waitTrace(t, exp, id, "enqueue", publish, "dispatch acme", "provider create")
		if dispatches, creates := tr.count("dispatch acme"), tr.count("provider create"); dispatches != 2 || creates != 2 {
			return fmt.Errorf("%d dispatch spans and %d provider creates, want 2 and 2:\n%s", dispatches, creates, tr)
		}
		return nil
	})
	t.Logf("span tree of a retried operation:\n%s", tr)
	attempts := map[string]string{}
	for _, s := range tr {
		switch s.Name {
		case publish:
			if got := tr.parentOf(s); got != "enqueue" {
				t.Errorf("a publish has parent %q, want enqueue", got)
			}
		case "dispatch acme":
			if got := tr.parentOf(s); got != publish {
				t.Errorf("a dispatch has parent %q, want %q", got, publish)
			}
			attempts[attr(s, "actledger.attempt")] = attr(s, "actledger.state")
		}
	}
	if attempts["1"] != "retry_wait" || attempts["2"] != "succeeded" {
		t.Errorf("dispatch spans by attempt: %v, want 1: retry_wait, 2: succeeded", attempts)
	}
	got := p.Traceparents.Values()
	if len(got) != 2 {
		t.Fatalf("the supplier received %d requests, want 2", len(got))
	}
	for _, h := range got {
		if tracing.TraceID(h) != id.String() {
			t.Errorf("the supplier received traceparent %q, want one in trace %s", h, id)
		}
	}
}

// count is how many spans of the trace are named name.
func (tr spanTree) count(name string) int {
	n := 0
	for _, s := range tr {
		if s.Name == name {
			n++
		}
	}
	return n
}
