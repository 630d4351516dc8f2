package drill

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/actledger/actledger/action"
	"github.com/actledger/actledger/client"
	"github.com/actledger/actledger/provider"
)

// The scenarios, in the order they run.
const (
	LostResponse     = "lost_response"
	ErrorAfterCommit = "error_after_commit"
	Replan           = "replan"
	Concurrent       = "concurrent"
	WorkerLost       = "worker_lost"
	ChangedParams    = "changed_params"
	ExpiredApproval  = "expired_approval"
	EmptyLookup      = "empty_lookup"
)

// Scenarios are every scenario's name, in the order a drill runs them.
var Scenarios = []string{LostResponse, ErrorAfterCommit, Replan, Concurrent, WorkerLost, ChangedParams, ExpiredApproval, EmptyLookup}

// DefaultPatience is how long a scenario waits for its operation to settle.
const DefaultPatience = 2 * time.Minute

// concurrentRequests is how many identical requests the concurrent scenario sends at once.
const concurrentRequests = 20

// expiringApproval is the lifetime of expired_approval's approval: short, so that it ends while
// the first call's answer is still held, and long enough for a loaded machine to dispatch the
// operation before it ends.
const expiringApproval = 3 * time.Second

// Options configure a drill.
type Options struct {
	// Registry is the providers file, loaded (provider.LoadEnv).
	Registry *provider.Registry
	// Action is the action to drill; Params its params (a JSON object the action accepts).
	Action string
	Params json.RawMessage
	// Only, when not empty, runs these scenarios only.
	Only []string
	// DatabaseURL is an empty database for the drill's ledger; empty starts a private Postgres
	// from the local binaries, removed afterwards.
	DatabaseURL string
	// AllowProduction lets the drill send to a provider whose environment is production.
	AllowProduction bool
	// Patience bounds the wait for one operation to settle; default DefaultPatience.
	Patience time.Duration
	// Progress receives one line per step as the drill runs; nil discards.
	Progress io.Writer
	// Logger receives the pipeline's warnings and errors; nil discards.
	Logger *slog.Logger
}

// ErrRefused is a drill that may not start: an unknown action or scenario, params the action
// refuses, a production provider without AllowProduction. Nothing was sent.
var ErrRefused = errors.New("drill refused")

// Check validates opts without starting anything: the action, its params, the scenarios and the
// provider's environment. An error wraps ErrRefused.
func Check(opts Options) (*provider.Config, error) {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
	}
	if opts.Registry == nil {
		return nil, refuse("no providers file")
	}
	pc, ok := opts.Registry.ForAction(opts.Action)
	if !ok {
		return nil, refuse("the providers file has no action %q (it has: %s)", opts.Action, strings.Join(opts.Registry.Actions(), ", "))
	}
	contract, _ := opts.Registry.Action(opts.Action)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(opts.Params, &obj); err != nil || obj == nil {
		return nil, refuse("--params must be a JSON object")
	}
	if err := contract.CheckParams(opts.Params); err != nil {
		return nil, refuse("action %s refuses these params: %v", opts.Action, err)
	}
	if contract.HasBusinessKey() && keyField(contract, opts.Params) == "" {
		return nil, refuse("action %s derives its business key from params the drill cannot vary (it changes one string param at a time, and none gives another key); every scenario needs an intention of its own", opts.Action)
	}
	for _, s := range opts.Only {
		if !slices.Contains(Scenarios, s) {
			return nil, refuse("no scenario %q (the scenarios: %s)", s, strings.Join(Scenarios, ", "))
		}
	}
	if strings.EqualFold(pc.Environment, "production") && !opts.AllowProduction {
		return nil, refuse("provider %s is configured for environment production (base_url %s): a drill makes real effects there; point it at a test environment, or pass --allow-production if this really is what you want",
			pc.Name, pc.BaseURL)
	}
	return pc, nil
}

// drill is one run.
type drill struct {
	opts   Options
	pc     *provider.Config
	p      *pipeline
	count  *counter
	run    string // unique to this run, in every key
	report *Report
	// created are the operations each scenario requested, by external key; mu guards it, as
	// the concurrent scenario requests from many goroutines.
	mu      sync.Mutex
	created []Effect
	current string // the scenario running
	// keyField is the param the action's business key is made of, which the drill varies so
	// that every scenario is an intention of its own; "" without a business key.
	keyField string
	// observed are the external keys whose effects a scenario counted, or tried to.
	observed map[string]bool
}

// uncountedEffects lists, for the report, every operation the drill requested whose effects were
// not counted (a scenario stopped before it could count them): a person checks them by hand.
func (d *drill) uncountedEffects() {
	for _, c := range d.created {
		if !d.observed[c.Reference] {
			d.report.Effects = append(d.report.Effects, c)
		}
	}
}

// Run runs the drill and returns its report. The error is for a drill that could not run
// (ErrRefused, a ledger that would not start, a supplier that does not answer) or was stopped
// (ctx ended): the report then says which scenarios did not finish and which effects exist so
// far. Everything the drill started is stopped and removed before Run returns.
func Run(ctx context.Context, opts Options) (*Report, error) {
	pc, err := Check(opts)
	if err != nil {
		return nil, err
	}
	opts.Patience = cmp.Or(opts.Patience, DefaultPatience)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	d := &drill{opts: opts, pc: pc, run: strings.ToLower(rand.Text()[:6]), observed: map[string]bool{}}
	if contract, _ := opts.Registry.Action(opts.Action); contract.HasBusinessKey() {
		d.keyField = keyField(contract, opts.Params)
	}
	d.report = &Report{Action: opts.Action, Provider: pc.Name, Scenarios: []Scenario{}, Effects: []Effect{},
		environment: pc.Environment, account: pc.Account}
	started := time.Now()
	defer func() { d.report.seconds = time.Since(started).Seconds() }()
	if err := reachable(ctx, pc); err != nil {
		return nil, err
	}
	d.progress("drilling %s on provider %s (%s, account %s)", opts.Action, pc.Name, pc.BaseURL, pc.Account)
	quiet := slog.New(levelHandler{Handler: opts.Logger.Handler(), min: slog.LevelWarn})
	p, err := startPipeline(ctx, opts.Registry, opts.DatabaseURL, quiet, d.progress)
	if err != nil {
		return nil, err
	}
	defer p.close()
	d.p = p
	d.count = &counter{pc: pc, http: provider.NewHTTP(pc, provider.HTTPOptions{}), started: started, faults: p.faults, patience: opts.Patience, wait: d.wait}
	d.report.counted = cmp.Or(d.count.method(), "nothing (no lookup, no reconcile.list)")
	d.progress("pipeline up: API, ledger, relay, JetStream, 2 dispatchers, lease sweeper (lease %s), reconciler; effects counted by %s", p.lease, d.report.counted)

	for _, name := range Scenarios {
		if len(opts.Only) > 0 && !slices.Contains(opts.Only, name) {
			continue
		}
		if ctx.Err() != nil {
			d.report.Scenarios = append(d.report.Scenarios, Scenario{Name: name, State: "not run", Review: []string{}, Why: "not run: the drill was stopped"})
			continue
		}
		d.progress("%s: %s", name, faultOf[name])
		t0 := time.Now()
		d.current = name
		s := d.scenario(ctx, name)
		s.Seconds = roundTenth(time.Since(t0).Seconds())
		if ctx.Err() != nil && s.Passed == nil {
			s.Why = "not finished: the drill was stopped"
		}
		d.progress("%s: %s%s (%.1f s)", name, s.verdict(), whyLine(s.Why), s.Seconds)
		d.report.Scenarios = append(d.report.Scenarios, s)
	}
	d.uncountedEffects()
	failed, unknown := d.report.Failed()
	d.report.Passed = failed == 0 && unknown == 0 && len(d.report.Scenarios) > 0
	if ctx.Err() != nil {
		d.report.Passed = false
		d.report.stopped = context.Cause(ctx).Error()
		return d.report, fmt.Errorf("drill stopped: %w", context.Cause(ctx))
	}
	return d.report, nil
}

func whyLine(why string) string {
	if why == "" {
		return ""
	}
	return ": " + why
}

func roundTenth(s float64) float64 { return float64(int64(s*10+0.5)) / 10 }

// faultOf says, for the progress lines and the report, what each scenario does.
var faultOf = map[string]string{
	LostResponse:     "the supplier commits, its answer is lost on the way back",
	ErrorAfterCommit: "the supplier commits, its answer is replaced by a 500",
	Replan:           "the same intention again under a new client key; then a separately approved control",
	Concurrent:       fmt.Sprintf("%d identical requests at once", concurrentRequests),
	WorkerLost:       "the worker stalls after the supplier committed; its lease expires and another worker takes over",
	ChangedParams:    "the same key again with other params",
	ExpiredApproval:  "the approval expires while the answer is held and the outcome unknown; the effect is found late",
	EmptyLookup:      "the supplier commits, its answer is lost, and every lookup inside the visibility lag answers none",
}

// progress writes one line to Options.Progress.
func (d *drill) progress(format string, args ...any) {
	if d.opts.Progress != nil {
		fmt.Fprintf(d.opts.Progress, "drill: "+format+"\n", args...)
	}
}

// wait waits d, saying why on a progress line.
func (d *drill) wait(ctx context.Context, dur time.Duration, why string) error {
	d.progress("  waiting %.1f s for %s", dur.Seconds(), why)
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// reachable checks that the supplier's host answers a connection, so that a supplier down for the
// whole drill is one clear message instead of eight scenarios of retries.
func reachable(ctx context.Context, pc *provider.Config) error {
	u, err := url.Parse(pc.BaseURL)
	if err != nil {
		return fmt.Errorf("provider %s: base_url: %w", pc.Name, err)
	}
	host := u.Host
	if u.Port() == "" {
		port := "443"
		if u.Scheme == "http" {
			port = "80"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("the supplier of provider %s does not answer at %s (%v): nothing was sent; start it or fix base_url", pc.Name, host, err)
	}
	return conn.Close()
}

// scenario runs one scenario, turning an error of the drill itself into a verdict that says so.
func (d *drill) scenario(ctx context.Context, name string) Scenario {
	in := d.paramsFor(name)
	s := &Scenario{Name: name, Review: []string{}, fault: faultOf[name], params: string(in), in: in}
	var err error
	switch name {
	case LostResponse:
		err = d.faulted(ctx, s, fault{kind: faultDrop}, 0, nil)
	case ErrorAfterCommit:
		err = d.faulted(ctx, s, fault{kind: faultError500}, 0, nil)
	case Replan:
		err = d.replan(ctx, s)
	case Concurrent:
		err = d.concurrent(ctx, s)
	case WorkerLost:
		err = d.workerLost(ctx, s)
	case ChangedParams:
		err = d.changedParams(ctx, s)
	case ExpiredApproval:
		err = d.expiredApproval(ctx, s)
	case EmptyLookup:
		err = d.emptyLookup(ctx, s)
	}
	if err != nil {
		s.Passed = nil
		s.Why = "the drill could not run this scenario: " + err.Error()
	}
	return *s
}

// key is the client key of one operation of scenario name.
func (d *drill) key(name string, suffix string) string {
	k := "drill-" + d.run + "-" + name
	if suffix != "" {
		k += "-" + suffix
	}
	return k
}

// approve is an approver's approval of params, valid for ttl.
func (d *drill) approve(ctx context.Context, params json.RawMessage, ttl time.Duration) (*client.Approval, error) {
	return d.p.approver.CreateApproval(ctx, client.CreateApprovalRequest{
		Action: d.opts.Action, Params: params, TTLSeconds: int64(ttl / time.Second), PolicyVersion: "drill",
	})
}

// request is the agent's POST /v1/operations.
func (d *drill) request(ctx context.Context, key string, params json.RawMessage, approvalID string) (*client.Operation, error) {
	op, err := d.p.agent.CreateOperation(ctx, client.CreateOperationRequest{Action: d.opts.Action, Key: key, Params: params, ApprovalID: approvalID})
	if err == nil {
		d.requested(op)
	}
	return op, err
}

// requested notes an operation the current scenario requested.
func (d *drill) requested(op *client.Operation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !slices.ContainsFunc(d.created, func(e Effect) bool { return e.Reference == op.ExternalKey }) {
		d.created = append(d.created, Effect{Scenario: d.current, Reference: op.ExternalKey})
	}
}

// requestArmed arms ft (and, with emptyFor, the lookup rule) for the next new operation's first
// create, and requests the operation. The fault is in place before any worker can send it.
func (d *drill) requestArmed(ctx context.Context, key string, params json.RawMessage, approvalID string, ft *fault, emptyFor time.Duration) (*client.Operation, error) {
	if ft != nil {
		d.p.faults.armNext(*ft, emptyFor)
	}
	op, err := d.request(ctx, key, params, approvalID)
	if err != nil {
		d.p.faults.disarm()
		return nil, err
	}
	d.p.faults.watch(op.ExternalKey)
	return op, nil
}

// injected is an error when the fault armed for op was not taken by op's create: nothing
// carried its external key, so the scenario tested nothing.
func (d *drill) injected(op *client.Operation) error {
	if d.p.faults.disarm() || !d.p.faults.armed(op.ExternalKey) {
		return fmt.Errorf("the fault was not injected: no create request carried the operation's external key %s", op.ExternalKey)
	}
	return nil
}

// settled waits until the operation is in a state no worker moves by itself (succeeded, failed,
// held, cancelled, review), or the patience runs out (the operation is then returned as it is,
// with ok false).
func (d *drill) settled(ctx context.Context, id string) (op *client.Operation, ok bool, err error) {
	deadline := time.Now().Add(d.opts.Patience)
	op, err = d.p.agent.GetOperation(ctx, id)
	for err == nil {
		if op.Status.Final() || op.Status == client.StatusReview {
			return op, true, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return op, false, nil
		}
		next, changed, werr := d.p.agent.WaitOperation(ctx, id, op.ETag, min(left, 10*time.Second))
		if err = werr; err == nil && changed && next != nil {
			op = next
		}
	}
	return nil, false, err
}

// observe fills what the user sees of op, the review items, the access check, and counts op's
// effects at the supplier, recording them for the report. It returns the count.
func (d *drill) observe(ctx context.Context, s *Scenario, op *client.Operation, settledOK bool) tally {
	s.State, s.Summary = string(op.Status), op.Summary
	if !settledOK {
		lag := ""
		if d.pc.Lookup != nil {
			lag = fmt.Sprintf(" (the provider's lookup visibility_lag is %s)", d.pc.Lookup.VisibilityLag.Duration)
		}
		s.unsettled = fmt.Sprintf("operation %s was still %s after --patience %s%s: raise --patience", op.ID, op.Status, d.opts.Patience, lag)
	}
	if items, err := d.p.operator.AllReview(ctx); err == nil {
		for _, it := range items {
			if it.OperationID != nil && *it.OperationID == op.ID && !slices.Contains(s.Review, it.Reason) {
				s.Review = append(s.Review, it.Reason)
			}
		}
	}
	hidden := d.hidden(ctx, op.ID)
	s.AccessOK = hidden && (s.AccessOK || !s.accessChecked)
	s.accessChecked = true
	t := d.count.count(ctx, op.ExternalKey, op.Params)
	d.observed[op.ExternalKey] = true
	for _, ref := range t.references {
		d.report.Effects = append(d.report.Effects, Effect{Scenario: s.Name, Reference: op.ExternalKey, ProviderReference: &ref})
	}
	if t.n == nil {
		d.report.Effects = append(d.report.Effects, Effect{Scenario: s.Name, Reference: op.ExternalKey})
	}
	st := d.p.faults.stats(op.ExternalKey)
	line := fmt.Sprintf("Operation `%s`, external key `%s`: %d create request(s) sent, %d lookup(s) asked by actledger", op.ID, op.ExternalKey, st.sent, st.lookups)
	switch {
	case t.n == nil || *t.n == 0:
	case t.how == "reconcile.list" && d.pc.Reconcile.Condition != "" && t.mismatched == 0:
		line += "; the supplier's record matches the approved params (reconcile.match)"
	case t.how == "reconcile.list" && d.pc.Reconcile.Condition != "":
		line += fmt.Sprintf("; %d of the supplier's records do not match the approved params (reconcile.match)", t.mismatched)
	default:
		line += "; params at the supplier not compared (no reconcile.match)"
	}
	s.notes = append(s.notes, line)
	return t
}

// hidden reports whether another tenant's token and another scope's token both get 404 for id.
func (d *drill) hidden(ctx context.Context, id string) bool {
	for _, c := range []*client.Client{d.p.otherTenant, d.p.otherScope} {
		if _, err := c.GetOperation(ctx, id); !client.IsNotFound(err) {
			return false
		}
	}
	return true
}

// add adds t's count to a scenario's effects (nil stays nil: one uncounted part makes the whole
// uncounted).
func add(s *Scenario, t tally, first bool) {
	switch {
	case t.n == nil:
		s.Effects = nil
	case first:
		n := *t.n
		s.Effects = &n
	case s.Effects != nil:
		n := *s.Effects + *t.n
		s.Effects = &n
	}
}

// judge sets the verdict: failed when why names a failure; else not established when a count is
// missing (with the references to check by hand); else passed.
func judge(s *Scenario, why []string, uncounted []string, problem string) {
	if len(why) > 0 {
		f := false
		s.Passed, s.Why = &f, strings.Join(why, "; ")
		return
	}
	if s.unsettled != "" {
		s.Passed, s.Why = nil, "could not be established: "+s.unsettled
		return
	}
	if len(uncounted) > 0 {
		s.Passed = nil
		s.Why = fmt.Sprintf("could not be established: %s. Check by hand that the supplier holds exactly one effect for %s", problem, strings.Join(uncounted, ", "))
		return
	}
	t := true
	s.Passed = &t
}

// endedWell reports whether op ended as the contract allows after a lost answer: succeeded, or in
// review with the supplier's reference, or in review at all where the contract cannot settle it
// (the provider has no lookup: a person must).
func (d *drill) endedWell(op *client.Operation) bool {
	return op.Status == client.StatusSucceeded ||
		(op.Status == client.StatusReview && (op.ProviderReference != nil || d.pc.Lookup == nil))
}

// oneEffect adds the failure of a count that is not one.
func oneEffect(why []string, t tally, what string) []string {
	switch {
	case t.n == nil:
		return why
	case *t.n == 0:
		return append(why, fmt.Sprintf("the supplier holds no effect for %s, though actledger sent it", what))
	case *t.n > 1:
		return append(why, fmt.Sprintf("the supplier holds %d effects for %s (%s): one intention became %d", *t.n, what, strings.Join(t.references, ", "), *t.n))
	}
	if t.mismatched > 0 {
		return append(why, fmt.Sprintf("the supplier's record for %s does not match the approved params (reconcile.match is false)", what))
	}
	return why
}

// asAPIError is errors.As for the client's API error.
func asAPIError(err error, target **client.Error) bool { return errors.As(err, target) }

// keyField is the first string param (by name) whose change gives params the action accepts and
// another business key; "" when there is none.
func keyField(contract *action.Contract, params json.RawMessage) string {
	ctx := context.Background()
	var obj map[string]any
	if json.Unmarshal(params, &obj) != nil {
		return ""
	}
	key, _, _ := contract.BusinessKey(ctx, params, "drill")
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		v, isString := obj[name].(string)
		if !isString {
			continue
		}
		changed := maps.Clone(obj)
		changed[name] = v + "-drill"
		raw, _ := json.Marshal(changed)
		if contract.CheckParams(raw) != nil {
			continue
		}
		if k, ok, err := contract.BusinessKey(ctx, raw, "drill"); err == nil && ok && k != key {
			return name
		}
	}
	return ""
}

// paramsFor are the params of one intention of the drill, tag naming it: the drill's params,
// with the business key's param made the intention's own when the action declares a key.
func (d *drill) paramsFor(tag string) json.RawMessage {
	if d.keyField == "" {
		return d.opts.Params
	}
	var obj map[string]any
	_ = json.Unmarshal(d.opts.Params, &obj)
	obj[d.keyField] = fmt.Sprintf("%v-drill-%s-%s", obj[d.keyField], d.run, tag)
	raw, _ := json.Marshal(obj)
	return raw
}
