package statement

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/reconciler"
)

// Defaults of Config.
const (
	// DefaultLease is how long a run holds its provider without renewing;
	// it renews after every page, so a page may take up to this long.
	DefaultLease = 2 * time.Minute
	// DefaultAttentionLimit bounds the findings a Report lists.
	DefaultAttentionLimit = 1000
)

// keptRecordBytes bounds the record a finding keeps for the person
// deciding: the supplier's record as listed, up to 4 KB.
const keptRecordBytes = 4096

// missingBatch is how many unlisted successes are judged per query.
const missingBatch = 500

// Errors of Run.
var (
	// ErrUnknownProvider: no provider of that name is configured.
	ErrUnknownProvider = errors.New("statement: no such provider")
	// ErrNoStatement: the provider has no reconcile: section.
	ErrNoStatement = errors.New("statement: the provider has no reconcile section")
	// ErrBadWindow: since is not before until, or until is in the future.
	ErrBadWindow = errors.New("statement: bad window")
)

// Config configures a Runner. Zero values mean the documented defaults.
type Config struct {
	// Store is the ledger. Required.
	Store *ledger.Store
	// Registry holds the providers and their reconcile sections. Required.
	Registry *provider.Registry
	// Reconciler applies each record that names an operation as evidence.
	// Required.
	Reconciler *reconciler.Reconciler
	// HTTP configures the client that reads the supplier's pages (the same
	// as dispatch's).
	HTTP provider.HTTPOptions
	// Lease: DefaultLease.
	Lease time.Duration
	// AttentionLimit: DefaultAttentionLimit.
	AttentionLimit int
	Logger         *slog.Logger
}

// Runner runs providers' statements.
type Runner struct {
	cfg Config
	log *slog.Logger
}

// New returns a Runner.
func New(cfg Config) (*Runner, error) {
	if cfg.Store == nil || cfg.Registry == nil || cfg.Reconciler == nil {
		return nil, errors.New("statement: Store, Registry and Reconciler are required")
	}
	cfg.Lease = cmp.Or(cfg.Lease, DefaultLease)
	cfg.AttentionLimit = cmp.Or(cfg.AttentionLimit, DefaultAttentionLimit)
	return &Runner{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default())}, nil
}

// Options of one run.
type Options struct {
	// Since and Until bound the records read, [Since, Until) by their
	// created time. Zero: the provider's window, ending lag ago.
	Since, Until time.Time
	// DryRun judges and reports, and changes nothing: no operation, no
	// review item, no run recorded.
	DryRun bool
	// Actor records who asked: "schedule", or "operator:<token name>".
	Actor string
}

// Report is what a run did.
type Report struct {
	Run ledger.StatementRun
	// Attention lists the records and operations that need a person and
	// the records that were skipped, in the order judged, at most
	// Config.AttentionLimit of them; Unlisted counts the rest.
	Attention []ledger.StatementRecord
	Unlisted  int64
}

// Window is the span a run of s reads at now when the caller names none:
// [now − lag − window, now − lag).
func Window(s *provider.Statement, now time.Time) (since, until time.Time) {
	until = now.Add(-s.Lag).Truncate(time.Second)
	return until.Add(-s.Window), until
}

// Run reads the provider's statement for the window and judges it. A run
// that finds another holding the provider returns at once, recorded as
// yielded. A supplier's failure is not an error of Run: the run is
// recorded failed with it (Report.Run.Error), as is one that stopped
// early (incomplete); either way missing is not judged.
func (r *Runner) Run(ctx context.Context, name string, o Options) (Report, error) {
	cfg, ok := r.cfg.Registry.Provider(name)
	if !ok {
		return Report{}, fmt.Errorf("%w: %s", ErrUnknownProvider, name)
	}
	st := cfg.Reconcile
	if st == nil {
		return Report{}, fmt.Errorf("%w: %s", ErrNoStatement, name)
	}
	now := r.cfg.Store.Now()
	since, until := Window(st, now)
	if !o.Until.IsZero() {
		until = o.Until
	}
	if !o.Since.IsZero() {
		since = o.Since
	} else if !o.Until.IsZero() {
		since = until.Add(-st.Window)
	}
	switch {
	case !since.Before(until):
		return Report{}, fmt.Errorf("%w: since %s is not before until %s", ErrBadWindow, since.Format(time.RFC3339), until.Format(time.RFC3339))
	case until.After(now):
		return Report{}, fmt.Errorf("%w: until %s is in the future", ErrBadWindow, until.Format(time.RFC3339))
	}
	tenant, err := r.cfg.Store.EnsureTenant(ctx, cfg.Tenant)
	if err != nil {
		return Report{}, fmt.Errorf("statement: tenant %s of provider %s: %w", cfg.Tenant, name, err)
	}
	run, err := r.cfg.Store.StartStatementRun(ctx, ledger.NewStatementRun{
		Tenant: tenant, Provider: name, Since: since, Until: until,
		Actor: cmp.Or(o.Actor, "schedule"), Lease: r.cfg.Lease,
	})
	if err != nil {
		return Report{}, err
	}
	log := r.log.With("provider", name, "tenant", cfg.Tenant, "run", run.ID)
	if run.Status == ledger.RunYielded {
		log.InfoContext(ctx, "statement run yielded: another run holds the provider", "holder", deref(run.Error))
		return Report{Run: run}, nil
	}
	log.InfoContext(ctx, "statement run started", "since", since, "until", until, "dry_run", o.DryRun)
	j := &judging{
		runner: r, cfg: cfg, st: st, run: run, dry: o.DryRun, log: log,
		client: provider.NewHTTP(cfg, r.cfg.HTTP),
	}
	status, pages, runErr := j.read(ctx)
	if status == ledger.RunComplete && runErr == nil {
		runErr = j.missing(ctx)
		if runErr != nil {
			status = ledger.RunFailed
		}
	}
	errText := ""
	if runErr != nil {
		errText = runErr.Error()
	}
	// The run ends even when ctx was cancelled mid-page: it is recorded
	// with what it read.
	endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	done, err := r.cfg.Store.FinishStatementRun(endCtx, run, status, pages, errText, !o.DryRun)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Run: done}
	if rep.Attention, rep.Unlisted, err = r.attention(endCtx, done); err != nil {
		return Report{}, err
	}
	if o.DryRun {
		if err := r.cfg.Store.DiscardStatementRun(endCtx, done); err != nil {
			return Report{}, err
		}
	}
	log.InfoContext(ctx, "statement run ended", "status", done.Status, "pages", done.Pages, "findings", done.Findings, "error", errText)
	return rep, nil
}

// attention reads the findings a report lists.
func (r *Runner) attention(ctx context.Context, run ledger.StatementRun) ([]ledger.StatementRecord, int64, error) {
	recs, err := r.cfg.Store.StatementFindings(ctx, run.ID, 0, r.cfg.AttentionLimit)
	if err != nil {
		return nil, 0, err
	}
	var total int64
	for f, n := range run.Findings {
		if f != ledger.FindingMatched && f != ledger.FindingForeign {
			total += n
		}
	}
	return recs, max(0, total-int64(len(recs))), nil
}

// judging is one run under way.
type judging struct {
	runner *Runner
	cfg    *provider.Config
	st     *provider.Statement
	run    ledger.StatementRun
	dry    bool
	log    *slog.Logger
	client *provider.HTTP
	seq    int
}

// read reads and judges the window's pages, until the last, max_pages, a
// cursor seen before, or a failure.
func (j *judging) read(ctx context.Context) (ledger.RunStatus, int, error) {
	var cursor *provider.StatementCursor
	seen := map[string]bool{}
	pages := 0
	for {
		if pages == j.st.MaxPages {
			return ledger.RunIncomplete, pages, fmt.Errorf("stopped after max_pages (%d) pages: the rest of the window was not read, so missing was not judged", j.st.MaxPages)
		}
		page, err := j.client.ListPage(ctx, j.run.Since, j.run.Until, cursor)
		if err != nil {
			return ledger.RunFailed, pages, fmt.Errorf("page %d: %w", pages+1, err)
		}
		pages++
		if err := j.judgePage(ctx, page.Records); err != nil {
			return ledger.RunFailed, pages, fmt.Errorf("page %d: %w", pages, err)
		}
		if err := j.runner.cfg.Store.RenewStatementLease(ctx, j.run, j.runner.cfg.Lease); err != nil {
			return ledger.RunFailed, pages, err
		}
		if page.Next == nil {
			return ledger.RunComplete, pages, nil
		}
		key := page.Next.String()
		if seen[key] || (cursor != nil && cursor.String() == key) {
			return ledger.RunIncomplete, pages, fmt.Errorf("page %d gave a next cursor (%s) that was already read: the supplier's paging loops, so the run stopped and missing was not judged", pages, key)
		}
		seen[key] = true
		cursor = page.Next
	}
}

// judgePage judges one page's records, applies what they settle, and
// stores them.
func (j *judging) judgePage(ctx context.Context, recs []provider.StatementRecord) error {
	refs := make([]string, 0, len(recs))
	for _, rec := range recs {
		if rec.Skip == "" && rec.Reference != "" {
			refs = append(refs, rec.Reference)
		}
	}
	ops, err := j.runner.cfg.Store.StatementOperations(ctx, j.cfg.Name, refs)
	if err != nil {
		return err
	}
	rows := make([]ledger.StatementRecord, 0, len(recs))
	for _, rec := range recs {
		j.seq++
		row := ledger.StatementRecord{Seq: j.seq, Record: kept(rec.Raw)}
		if rec.Reference != "" {
			row.Reference = &rec.Reference
		}
		if rec.ProviderReference != "" {
			row.ProviderReference = &rec.ProviderReference
		}
		if !rec.Created.IsZero() {
			row.Created = &rec.Created
		}
		row.Finding, row.Skip = j.judge(ctx, rec, ops, &row)
		rows = append(rows, row)
	}
	return j.runner.cfg.Store.AddStatementRecords(ctx, j.run.ID, rows)
}

// judge decides one record's finding (and why it was skipped, when it
// was), and applies it unless the run is dry.
func (j *judging) judge(ctx context.Context, rec provider.StatementRecord, ops map[string]ledger.Operation, row *ledger.StatementRecord) (ledger.Finding, *string) {
	skip := func(why string) (ledger.Finding, *string) { return ledger.FindingSkipped, &why }
	switch {
	case rec.Skip != "":
		return skip(rec.Skip)
	case rec.Created.Before(j.run.Since) || !rec.Created.Before(j.run.Until):
		return skip(fmt.Sprintf("created %s is outside the window [%s, %s)", rec.Created.Format(time.RFC3339),
			j.run.Since.Format(time.RFC3339), j.run.Until.Format(time.RFC3339)))
	case rec.Reference == "":
		return ledger.FindingForeign, nil
	}
	op, ok := ops[rec.Reference]
	if !ok {
		if !j.dry {
			if err := j.apply(ctx, rec, nil); err != nil {
				return skip("could not record it as unexplained: " + err.Error())
			}
		}
		return ledger.FindingUnexplained, nil
	}
	row.OperationID = &op.ID
	agrees, err := j.st.Match(rec, op.Params)
	if err != nil {
		return skip("reconcile.match failed on it: " + err.Error())
	}
	finding := Judge(op, rec.ProviderReference, agrees)
	if j.dry || finding == ledger.FindingMatched || alreadyOpen(op) {
		return finding, nil
	}
	if err := j.apply(ctx, rec, &agrees); err != nil {
		return skip("could not apply it: " + err.Error())
	}
	return finding, nil
}

// apply hands rec to the reconciler as evidence of a success.
func (j *judging) apply(ctx context.Context, rec provider.StatementRecord, agrees *bool) error {
	ev := reconciler.Evidence{
		Source: "statement:" + rec.ProviderReference, Provider: j.cfg.Name,
		Reference: rec.Reference, ProviderReference: rec.ProviderReference,
		Status: ledger.EvidenceSucceeded, Final: true, Agrees: agrees, Kind: ledger.EventReconciled,
	}
	detail := map[string]any{"run": j.run.ID}
	if agrees == nil {
		// No operation of this provider holds the reference: the data
		// becomes the unmatched evidence's detail.
		detail["finding"] = "unexplained_effect"
	}
	if record := kept(rec.Raw); record != nil {
		detail["record"] = record
	}
	data, err := json.Marshal(detail)
	if err != nil {
		return err
	}
	ev.Data = data
	outcome, err := j.runner.cfg.Reconciler.Apply(ctx, ev)
	if err != nil {
		return err
	}
	j.log.InfoContext(ctx, "statement record applied", "reference", rec.Reference, "provider_reference", rec.ProviderReference, "outcome", outcome)
	return nil
}

// missing sends to a person each success of the judged span that no
// record named: [since + skew, until − skew), judged only after the whole
// window was read.
func (j *judging) missing(ctx context.Context) error {
	from, to := j.run.Since.Add(j.st.Skew), j.run.Until.Add(-j.st.Skew)
	if !from.Before(to) {
		return nil
	}
	var after *ledger.Position
	for {
		ops, err := j.runner.cfg.Store.UnlistedSuccesses(ctx, j.run, from, to, after, missingBatch)
		if err != nil {
			return err
		}
		rows := make([]ledger.StatementRecord, 0, len(ops))
		for _, op := range ops {
			j.seq++
			row := ledger.StatementRecord{Seq: j.seq, Finding: ledger.FindingMissing, OperationID: &op.ID, ProviderReference: op.ProviderReference}
			ref := op.ExternalKey
			row.Reference = &ref
			rows = append(rows, row)
			if !j.dry {
				if err := j.toReview(ctx, op); err != nil {
					return err
				}
			}
		}
		if err := j.runner.cfg.Store.AddStatementRecords(ctx, j.run.ID, rows); err != nil {
			return err
		}
		if len(ops) < missingBatch {
			return nil
		}
		last := ops[len(ops)-1]
		after = &ledger.Position{At: last.UpdatedAt, ID: last.ID}
	}
}

// toReview moves a succeeded operation the statement does not list to
// review effect_missing. One that changed meanwhile is left as it is now.
func (j *judging) toReview(ctx context.Context, op ledger.Operation) error {
	now := j.runner.cfg.Store.Now()
	_, err := j.runner.cfg.Store.Transition(ctx, ledger.Change{
		ID: op.ID, From: op.Status, Version: op.Version, To: ledger.StatusReview,
		Kind: ledger.EventReconciled, Actor: "reconciler:statement",
		Detail: map[string]any{"finding": "missing", "run": j.run.ID, "since": j.run.Since, "until": j.run.Until,
			"provider_reference": op.ProviderReference},
		Review: &ledger.Review{Reason: ledger.ReasonEffectMissing, Owner: j.cfg.Review.Owner, Deadline: now.Add(j.cfg.Review.Deadline.Duration)},
	})
	if errors.Is(err, ledger.ErrStale) {
		j.log.InfoContext(ctx, "operation changed while judged missing; left as it is", "operation_id", op.ID)
		return nil
	}
	return err
}

// Judge is the finding of a record of an operation: the one place that
// says what a record means against what the ledger holds. agrees is the
// provider's reconcile.match on the record and the operation's params.
func Judge(op ledger.Operation, providerReference string, agrees bool) ledger.Finding {
	if op.Status == ledger.StatusReview && op.ReviewReason != nil {
		switch *op.ReviewReason {
		case ledger.ReasonDuplicateEffect:
			return ledger.FindingDuplicate
		case ledger.ReasonEffectMismatch, ledger.ReasonEvidenceMismatch, ledger.ReasonConflictingEvidence:
			return ledger.FindingMismatch
		}
	}
	switch {
	case !agrees:
		return ledger.FindingMismatch
	case op.ProviderReference != nil && *op.ProviderReference != providerReference:
		// A second effect: the ledger holds another reference.
		return ledger.FindingDuplicate
	case op.Status == ledger.StatusSucceeded:
		return ledger.FindingMatched
	case op.Status == ledger.StatusReview && op.ReviewReason != nil && *op.ReviewReason == ledger.ReasonEffectMissing:
		// Listed now: the person deciding the missing effect sees it.
		return ledger.FindingMatched
	case op.Status == ledger.StatusFailed, op.Status == ledger.StatusCancelled, op.Status == ledger.StatusHeld,
		op.Status == ledger.StatusAwaitingApproval:
		// The ledger holds that nothing happened; the supplier lists it.
		return ledger.FindingMismatch
	default:
		return ledger.FindingSettles
	}
}

// alreadyOpen reports whether op already waits for a person over what a
// statement finds: the next run does not open it again.
func alreadyOpen(op ledger.Operation) bool {
	if op.Status != ledger.StatusReview || op.ReviewReason == nil {
		return false
	}
	switch *op.ReviewReason {
	case ledger.ReasonDuplicateEffect, ledger.ReasonEffectMismatch, ledger.ReasonEffectMissing,
		ledger.ReasonEvidenceMismatch, ledger.ReasonConflictingEvidence:
		return true
	}
	return false
}

// kept is the record as a finding keeps it: whole up to keptRecordBytes,
// else nothing (a cut JSON text is no record).
func kept(raw json.RawMessage) []byte {
	if len(raw) == 0 || len(raw) > keptRecordBytes || !json.Valid(raw) {
		return nil
	}
	return raw
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
