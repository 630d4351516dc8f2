package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/action"
	"github.com/actledger/actledger/app"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/client"
	"github.com/actledger/actledger/dispatcher"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// The one intention both runs of the demo carry out.
const (
	demoAction   = "supplier.create_order"
	demoProvider = "acme"
	demoKey      = "po-1042" // the agent's business reference
	demoParams   = `{"qty":3,"sku":"A-1"}`
	demoWhat     = "3 × A-1"
	// demoLag is acme's lookup lag, and what its config declares as visibility_lag: the
	// provider's documented contract matches its behaviour, as it must for "absent" to be
	// believed. Short, so the story is over in seconds.
	demoLag = time.Second
)

// demo is `actledger demo`: the contract's lost-response story, told twice against one
// in-process mock supplier that commits the order and then drops the connection. A naive agent
// retries on error and ends with two orders; the same intention through the real pipeline
// (API, Postgres, outbox relay, embedded JetStream, dispatcher) is recorded as unknown, looked up
// after the supplier's visibility lag and found: one order. Each step is printed side by side,
// what the agent saw next to what is true at the supplier, because the gap between the two
// columns is the whole point.
//
// The ledger rows stay (they are history, in a tenant of their own, demo-<random>); everything
// else the demo starts is stopped on return. Routine logs are silenced so that stdout tells the
// story; warnings and errors still reach logger.
func demo(ctx context.Context, e env, args []string, stdout io.Writer, logger *slog.Logger) error {
	fs := newFlagSet("demo", io.Discard)
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("demo: %v: %w", err, errUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("demo takes no arguments, got %q: %w", fs.Arg(0), errUsage)
	}
	if *timeout <= 0 {
		return fmt.Errorf("demo: --timeout must be positive, got %s: %w", *timeout, errUsage)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, *timeout, fmt.Errorf("the demo did not finish within --timeout %s", *timeout))
	defer cancel()
	quiet := slog.New(minLevelHandler{Handler: logger.Handler(), min: slog.LevelWarn})

	supplier := mocksupplier.New(mocksupplier.Config{Idempotency: mocksupplier.Ignore, LookupLag: demoLag, Logger: quiet})
	defer supplier.Close()
	supplierURL, stopSupplier, err := serveLoopback(ctx, supplier, quiet)
	if err != nil {
		return err
	}
	defer stopSupplier()

	s := &story{w: stdout, supplier: supplier}
	s.intro()
	naive, err := s.naiveRun(ctx, supplierURL)
	if err != nil {
		return stopped(ctx, fmt.Errorf("naive run: %w", err))
	}
	ours, err := s.actledgerRun(ctx, e, supplierURL, quiet)
	if err != nil {
		return stopped(ctx, fmt.Errorf("actledger run: %w", err))
	}
	if naive == 2 && ours == 1 {
		s.printf("\n")
		s.paragraph(fmt.Sprintf("Same supplier, same fault. The naive retry turned one lost answer into a second "+
			"order. actledger recorded the outcome as unknown, never sent the order again, waited out "+
			"acme's %s lag and found the order by its reference.", demoLag))
		s.paragraph("The same proof on your own supplier, with this and seven more faults, effects " +
			"counted at the supplier: actledger drill ACTION --params JSON --providers FILE (docs/drills.md).")
		return nil
	}
	return fmt.Errorf("demo: the story did not go as the contract says: %d order(s) with the naive retry (want 2), %d with actledger (want 1)", naive, ours)
}

// stopped prefers the reason the demo was stopped (Ctrl-C, --timeout) over the error it caused.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("demo stopped: %w", context.Cause(ctx))
	}
	return err
}

// naiveRun is the agent without actledger: it POSTs the order, sees an error, and does what
// most HTTP clients and agent frameworks do with an error: it sends the same request again. It
// returns how many orders the supplier really holds for the one intention.
func (s *story) naiveRun(ctx context.Context, supplierURL string) (int, error) {
	const ref = demoKey
	s.supplier.SetFaults(ref, mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	client := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	body := `{"client_reference":"` + ref + `","qty":3,"sku":"A-1"}`

	s.section("1. A naive agent: on error, retry", []string{
		"The agent calls acme directly, with its own reference " + ref + ", and retries on error.",
	})
	start := time.Now()
	for attempt := 1; attempt <= 3; attempt++ {
		answer, ok, err := naivePost(ctx, client, supplierURL+"/v1/orders", body)
		if err != nil {
			return 0, err
		}
		saw := []string{"POST /v1/orders  client_reference " + ref, "→ " + answer}
		if attempt > 1 {
			saw = []string{"That looks like a failure, so it retries:", "POST /v1/orders  (the same request)", "→ " + answer}
		}
		s.row(start, saw, s.truth(ref))
		if ok {
			break
		}
	}
	n := s.supplier.Orders(ref)
	s.verdict(fmt.Sprintf("naive retry: %d %s for 1 intention", n, plural(n, "order")))
	return n, nil
}

// naivePost sends one order and describes the answer as the agent sees it. ok is true for a
// 2xx. An error is returned only when ctx ended: a failed call is part of the story.
func naivePost(ctx context.Context, client *http.Client, url, body string) (answer string, ok bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return "", false, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if ctx.Err() != nil {
		return "", false, ctx.Err()
	}
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return "error: connection closed, no answer (EOF)", false, nil
		}
		return "error: " + innermost(err).Error(), false, nil
	}
	defer res.Body.Close()
	var order struct {
		ID string `json:"id"`
	}
	_ = json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&order)
	answer = fmt.Sprintf("%d %s", res.StatusCode, http.StatusText(res.StatusCode))
	if order.ID != "" {
		answer += ", " + order.ID
	}
	return answer, res.StatusCode/100 == 2, nil
}

// innermost drops the wrappers (*url.Error and the like) whose text names ports and URLs.
func innermost(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// actledgerRun sends the same intention through actledger: approved once, requested by the
// agent, dispatched by the pipeline into the same fault. It returns how many orders the supplier
// really holds for the operation's external key.
func (s *story) actledgerRun(ctx context.Context, e env, supplierURL string, logger *slog.Logger) (int, error) {
	s.section("2. The same intention through actledger", []string{
		"Running in this process: HTTP API → Postgres (the operation and its outbox row in one",
		"transaction) → relay → JetStream (embedded) → dispatcher → acme. acme is configured as it",
		fmt.Sprintf("is: no idempotency key, a lookup by reference with a visibility lag of %s.", demoLag),
	})
	p, err := startPipeline(ctx, e, supplierURL, logger)
	if err != nil {
		return 0, err
	}
	defer p.close()
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	agent := client.New(p.apiURL, p.agent, client.Options{HTTPClient: hc})
	approver := client.New(p.apiURL, p.approver, client.Options{HTTPClient: hc})

	start := time.Now()
	approval, err := approver.CreateApproval(ctx, client.CreateApprovalRequest{
		Action: demoAction, Params: json.RawMessage(demoParams), TTLSeconds: 600, PolicyVersion: "demo",
	})
	if err != nil {
		return 0, demoErr(err)
	}
	s.row(start, []string{fmt.Sprintf("approver: POST /v1/approvals → %d", http.StatusCreated), demoWhat + ", one use"}, s.truth(""))

	// The fault goes on the whole-run queue: the external key, and so the per-reference queue,
	// exists only once the operation does, and the dispatcher may be faster than us.
	s.supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	request := client.CreateOperationRequest{Action: demoAction, Key: demoKey, Params: json.RawMessage(demoParams), ApprovalID: approval.ID}
	op, err := agent.CreateOperation(ctx, request)
	if err != nil {
		return 0, demoErr(err)
	}
	p.operation = op.ID
	ref := op.ExternalKey
	s.row(start, append([]string{
		fmt.Sprintf("agent: POST /v1/operations key %s → %d", demoKey, createStatus(op)),
		"status " + string(op.Status),
		"external_key " + op.ExternalKey,
	}, quote(op.Summary)...), s.truth(ref))

	if op, err = watch(ctx, agent, op.ID, client.StatusQueued, client.StatusDispatching); err != nil {
		return 0, err
	}
	s.row(start, append([]string{"GET /v1/operations/{id} → status " + string(op.Status)}, quote(op.Summary)...), s.truth(ref))

	if op.Status == client.StatusUnknown {
		// A re-planning model may well ask again; actledger answers with the same operation.
		again, err := agent.CreateOperation(ctx, request)
		if err != nil {
			return 0, demoErr(err)
		}
		s.row(start, []string{
			"The agent sends the same POST again anyway:",
			fmt.Sprintf("→ %d, Idempotent-Replayed: %t", createStatus(again), again.Replayed),
			"same operation, status " + string(again.Status),
		}, s.truth(ref))
		if op, err = watch(ctx, agent, op.ID, client.StatusUnknown, client.StatusDispatching); err != nil {
			return 0, err
		}
		saw := []string{"GET /v1/operations/{id} → status " + string(op.Status)}
		if op.ProviderReference != nil {
			saw = append(saw, "provider_reference "+*op.ProviderReference)
		}
		s.row(start, append(saw, quote(op.Summary)...), s.truth(ref))
	}
	n := s.supplier.Orders(ref)
	s.verdict(fmt.Sprintf("actledger: %d %s for 1 intention", n, plural(n, "order")))

	history, err := agent.AllOperationEvents(ctx, op.ID)
	if err != nil {
		return n, demoErr(err)
	}
	s.history(history)
	if op.Status != client.StatusSucceeded {
		return n, fmt.Errorf("the operation ended %s, want succeeded", op.Status)
	}
	return n, nil
}

// pipeline is actledger's write path running in this process, set up as `serve` sets it up but
// private to one demo run: its own tenant, its own embedded JetStream, its own provider config.
type pipeline struct {
	pool     *pgxpool.Pool
	store    *ledger.Store
	prefix   string // stream prefix, unique to this run
	apiURL   string
	agent    string // token secrets
	approver string
	log      *slog.Logger
	// operation is the demo's operation once created; close settles it if unfinished.
	operation string
	closers   []func()
}

// startPipeline starts Postgres access, an embedded JetStream in a temporary directory, the
// relay, the dispatcher and the API. The lease sweeper is left out on purpose: it works on every
// tenant of a possibly shared ledger and would hand other deployments' operations to the demo's
// mock supplier.
func startPipeline(ctx context.Context, e env, supplierURL string, logger *slog.Logger) (_ *pipeline, err error) {
	p := &pipeline{prefix: "DEMO" + rand.Text()[:8], log: logger}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	pool, stopDB, err := openDatabase(ctx, e, logger)
	if err != nil {
		return nil, err
	}
	p.pool = pool
	p.onClose(stopDB)

	dir, err := os.MkdirTemp("", "actledger-demo-nats-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory for JetStream: %w", err)
	}
	p.onClose(func() { _ = os.RemoveAll(dir) })
	registry, err := demoRegistry(supplierURL)
	if err != nil {
		return nil, err
	}
	a, err := app.Build(ctx, app.Config{
		Pool: pool,
		// The embedded server is a throwaway in a temporary directory: its warnings about
		// falling short of production durability (one replica) would only confuse, so only
		// errors pass.
		NATS: broker.Config{
			DataDir: dir, Prefix: p.prefix, Name: "actledger-demo",
			Logger: slog.New(minLevelHandler{Handler: logger.Handler(), min: slog.LevelError}),
		},
		Registry:   registry,
		Roles:      app.Roles{API: true, Relay: true, Dispatcher: true, Sweeper: app.SweeperNever},
		Dispatcher: dispatcher.Config{Concurrency: 4},
		Logger:     logger,
	})
	if err != nil {
		return nil, err
	}
	p.store = a.Store
	// Stopped before settle, so nothing moves under it; the broker closes after settle.
	p.onClose(a.Broker.Close)
	p.onClose(p.settle)

	tenant := "demo-" + strings.ToLower(rand.Text()[:8])
	for role, secret := range map[auth.Role]*string{auth.RoleAgent: &p.agent, auth.RoleApprover: &p.approver} {
		created, err := a.Tokens.Create(ctx, tenant, role, "")
		if err != nil {
			return nil, err
		}
		*secret = created.Secret
	}
	if err := a.Start(ctx); err != nil {
		return nil, err
	}
	p.onClose(a.Stop)
	url, stopAPI, err := serveLoopback(ctx, a.Handler, logger)
	if err != nil {
		return nil, err
	}
	p.apiURL = url
	p.onClose(stopAPI)
	return p, nil
}

// demoRegistry is acme as the story needs it, pointed at the in-process supplier: it ignores
// idempotency keys (no header configured) and offers a lookup by reference. The timeout is
// short so that even a stuck call cannot outlast the demo.
func demoRegistry(supplierURL string) (*provider.Registry, error) {
	return provider.NewRegistry(provider.File{
		Providers: map[string]provider.Config{demoProvider: {
			BaseURL:        supplierURL,
			Account:        "acct_demo",
			Environment:    "demo",
			Timeout:        provider.Duration{Duration: 2 * time.Second},
			Create:         provider.Endpoint{Method: http.MethodPost, Path: "/v1/orders"},
			ReferenceParam: "client_reference",
			ReferenceField: "id",
			Lookup: &provider.Lookup{
				Path:          "/v1/orders?client_reference=" + provider.ReferencePlaceholder,
				VisibilityLag: provider.Duration{Duration: demoLag},
			},
			Retry:  provider.RetryPolicy{MaxAttempts: 3, Initial: provider.Duration{Duration: 100 * time.Millisecond}, Max: provider.Duration{Duration: time.Second}},
			Review: provider.ReviewPolicy{Owner: "demo"},
		}},
		Actions: map[string]action.Contract{demoAction: {Provider: demoProvider}},
	})
}

func (p *pipeline) onClose(f func()) { p.closers = append(p.closers, f) }

// close stops everything in the reverse order of starting; the API first, so no request
// arrives at a stopped dispatcher, and the workers before settle, so nothing moves under it.
func (p *pipeline) close() {
	for _, f := range slices.Backward(p.closers) {
		f()
	}
	p.closers = nil
}

// outboxDeleteUnpublishedBySubject removes the messages no relay could ever publish once the
// demo's embedded JetStream is gone: those whose subject carries the demo's unique prefix.
const outboxDeleteUnpublishedBySubject = `DELETE FROM outbox WHERE published_at IS NULL AND subject LIKE $1`

// settle makes sure an operation the demo leaves unfinished (Ctrl-C, --timeout) is never sent
// later. The ledger may be shared with a real deployment, whose lease sweeper re-publishes
// operations stuck in queued or unknown to its own dispatchers, which would send this order to
// whatever that deployment calls "acme". The demo's supplier dies with the process, so the
// operation is cancelled (if its order was made, the history still says so), and its dispatch
// messages, which only the demo's JetStream could carry, are removed from the outbox, where
// every other relay would fail on them forever. A finished run has nothing to settle.
func (p *pipeline) settle() {
	// Cleanup runs after the demo's context may have ended (that is when it matters most).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if id, err := uuid.Parse(p.operation); err == nil {
		op, err := p.store.GetInternal(ctx, id)
		if err == nil && op.Status.CanMoveTo(ledger.StatusCancelled) {
			_, err = p.store.Transition(ctx, ledger.Change{
				ID: op.ID, From: op.Status, Version: op.Version, To: ledger.StatusCancelled,
				Kind: "demo_stopped", Actor: "demo",
				Detail: map[string]any{"why": "actledger demo stopped before the outcome was settled; its supplier was an in-process mock that no longer exists"},
			})
		}
		if err != nil {
			p.log.WarnContext(ctx, "could not settle the unfinished demo operation", "operation_id", id, "err", err)
		}
	}
	if _, err := p.pool.Exec(ctx, outboxDeleteUnpublishedBySubject, p.prefix+".%"); err != nil {
		p.log.WarnContext(ctx, "could not remove the demo's unpublished outbox messages", "prefix", p.prefix, "err", err)
	}
}

// serveLoopback serves h on a random port of 127.0.0.1 until stop is called; stop lets the
// requests in flight finish.
func serveLoopback(ctx context.Context, h http.Handler, logger *slog.Logger) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen on 127.0.0.1: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// createStatus is the HTTP status POST /v1/operations answered op with:
// 200 for a replay of the key, 201 for a new operation.
func createStatus(op *client.Operation) int {
	if op.Replayed {
		return http.StatusOK
	}
	return http.StatusCreated
}

// demoErr keeps an API refusal as it is and strips a network error to its
// innermost cause (no ports and URLs in the story).
func demoErr(err error) error {
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		return err
	}
	return innermost(err)
}

// watch reads the operation, as an agent polling for its result would, until its status is
// none of while.
func watch(ctx context.Context, c *client.Client, id string, while ...client.Status) (*client.Operation, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		op, err := c.GetOperation(ctx, id)
		if err != nil {
			return op, demoErr(err)
		}
		if !slices.Contains(while, op.Status) {
			return op, nil
		}
		select {
		case <-ctx.Done():
			return op, context.Cause(ctx)
		case <-tick.C:
		}
	}
}

// story prints the demo: two side-by-side timelines of at most pageWidth columns.
type story struct {
	w        io.Writer
	supplier *mocksupplier.Server
}

// Column widths: indent, time, what the agent saw, what is true at the supplier.
const (
	pageWidth  = 100
	timeWidth  = 8
	sawWidth   = 52
	truthWidth = pageWidth - 2 - timeWidth - 2 - sawWidth - 2
)

func (s *story) printf(format string, args ...any) { fmt.Fprintf(s.w, format, args...) }

func (s *story) intro() {
	s.printf("actledger demo: one order, one lost response, two ways to deal with it\n\n")
	s.paragraph(fmt.Sprintf("An agent orders %s from the supplier %q. acme saves the order, then the connection "+
		"drops before its answer leaves: the agent never hears back. Like many real suppliers, acme ignores "+
		"idempotency keys; it does offer a lookup by reference, where a new order shows up after %s. "+
		"Both runs below meet the same supplier and the same fault.", demoWhat, demoProvider, demoLag))
}

func (s *story) paragraph(text string) {
	for _, line := range wrap(text, pageWidth) {
		s.printf("%s\n", line)
	}
}

func (s *story) section(title string, notes []string) {
	s.printf("\n%s\n", title)
	for _, n := range notes {
		s.printf("   %s\n", n)
	}
	s.printf("\n  %-*s  %-*s  %s\n", timeWidth, "time", sawWidth, "what the agent saw", "what is true at the supplier")
	s.printf("  %s  %s  %s\n", strings.Repeat("─", timeWidth), strings.Repeat("─", sawWidth), strings.Repeat("─", truthWidth))
}

// row prints one step: the time since start, then the two columns side by side.
func (s *story) row(start time.Time, saw, truth []string) {
	var left, right []string
	for _, l := range saw {
		left = append(left, wrap(l, sawWidth)...)
	}
	for _, l := range truth {
		right = append(right, wrap(l, truthWidth)...)
	}
	at := fmt.Sprintf("+%.3fs", time.Since(start).Seconds())
	for i := range max(len(left), len(right)) {
		var l, r string
		if i < len(left) {
			l = left[i]
		}
		if i < len(right) {
			r = right[i]
		}
		line := fmt.Sprintf("  %-*s  %-*s  %s", timeWidth, at, sawWidth, l, r)
		s.printf("%s\n", strings.TrimRight(line, " "))
		at = ""
	}
}

// truth is the supplier's ground truth for reference: the orders that really exist and the
// create requests that really arrived, whatever any client was told.
func (s *story) truth(reference string) []string {
	orders, posts := 0, 0
	if reference != "" {
		orders, posts = s.supplier.Orders(reference), len(s.supplier.CreateRequests(reference))
	}
	return []string{fmt.Sprintf("%d %s, %d %s received", orders, plural(orders, "order"), posts, plural(posts, "POST"))}
}

func (s *story) verdict(v string) {
	s.printf("\n  verdict   %s\n", v)
}

// history prints the operation's events, with times since the first one, so the reader sees
// the unknown outcome and how it was settled.
func (s *story) history(events []client.Event) {
	s.printf("\nWhat actledger recorded (GET /v1/operations/{id}/events):\n\n")
	if len(events) == 0 {
		return
	}
	t0 := events[0].At
	for _, e := range events {
		from := ""
		if e.From != nil {
			from = string(*e.From)
		}
		line := fmt.Sprintf("  %-*s  %-16s %-25s %s", timeWidth, fmt.Sprintf("+%.3fs", e.At.Sub(t0).Seconds()),
			e.Kind, strings.TrimSpace(from+" → "+string(e.To)), eventDetail(e))
		s.printf("%s\n", strings.TrimRight(line, " "))
	}
}

// eventDetail is the part of an event's evidence the story needs, in words.
func eventDetail(e client.Event) string {
	var d struct {
		Class             string `json:"class"`
		HTTPStatus        int    `json:"http_status"`
		NextStep          string `json:"next_step"`
		ProviderReference string `json:"provider_reference"`
	}
	_ = json.Unmarshal(e.Detail, &d)
	switch e.Kind {
	case "attempt":
		answer := "no answer"
		if d.HTTPStatus != 0 {
			answer = fmt.Sprintf("HTTP %d", d.HTTPStatus)
		}
		out := fmt.Sprintf("%s, outcome %s", answer, d.Class)
		if d.NextStep != "" {
			out += "; next: " + strings.ReplaceAll(d.NextStep, "_", " ")
		}
		return out
	case "lookup_found":
		return "acme has it: " + d.ProviderReference
	}
	return ""
}

// quote wraps an operation's summary in quotes, as the sentence the agent reads.
func quote(summary string) []string {
	if summary == "" {
		return nil
	}
	return []string{"“" + summary + "”"}
}

// wrap breaks text into lines of at most width runes at spaces; a longer word stays whole.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len([]rune(line))+1+len([]rune(word)) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	if line != "" || len(lines) == 0 {
		lines = append(lines, line)
	}
	return lines
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// minLevelHandler raises a handler's minimum level. The demo runs the pipeline's components in
// this process; their routine info lines would drown the story on the terminal, their warnings
// must not be lost.
type minLevelHandler struct {
	slog.Handler
	min slog.Level
}

func (h minLevelHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.min && h.Handler.Enabled(ctx, level)
}

func (h minLevelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevelHandler{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevelHandler) WithGroup(name string) slog.Handler {
	return minLevelHandler{Handler: h.Handler.WithGroup(name), min: h.min}
}
