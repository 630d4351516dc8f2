package reconciler

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// ReplayOptions select what replay re-reads from the review stream.
type ReplayOptions struct {
	// Since skips items announced before it; zero reads the whole stream.
	Since time.Time
	// Reason keeps only items of this review reason; empty keeps all.
	Reason ledger.ReviewReason
	// DryRun reports what would change and changes nothing.
	DryRun bool
}

// ReplayItem is what replay found for one review item.
type ReplayItem struct {
	OperationID *uuid.UUID          `json:"operation_id,omitempty"`
	EvidenceID  *int64              `json:"evidence_id,omitempty"`
	Key         string              `json:"key,omitempty"`
	Reason      ledger.ReviewReason `json:"reason"`
	Result      ReplayResult        `json:"result"`
	Changed     bool                `json:"changed"`
	Detail      string              `json:"detail,omitempty"`
}

// ReplayResult says what replay found, or did, for one review item.
type ReplayResult string

// Replay results. When a lookup finds the effect and replay applies it
// (not a dry run), the result is what applying the evidence did: a
// ledger.EvidenceOutcome such as settled_succeeded (see ReplayApplied).
const (
	// ReplayLeftForAPerson: unmatched evidence, which only an operator
	// settles.
	ReplayLeftForAPerson ReplayResult = "left_for_a_person"
	// ReplayAlreadyClosed: the operation is no longer in review.
	ReplayAlreadyClosed ReplayResult = "already_closed"
	// ReplayNoLookup: the provider has no lookup to ask.
	ReplayNoLookup ReplayResult = "no_lookup"
	// ReplayLookupUntrusted: the operation was sent to another account or
	// environment than the provider's config names now; a lookup proves
	// nothing.
	ReplayLookupUntrusted ReplayResult = "lookup_untrusted"
	// ReplayWouldSettleSucceeded: a dry run's lookup found the effect.
	ReplayWouldSettleSucceeded ReplayResult = "would_settle_succeeded"
	// ReplayAbsentNotYetBelievable: the lookup found nothing, but too soon
	// after the last send for that to mean anything.
	ReplayAbsentNotYetBelievable ReplayResult = "absent_not_yet_believable"
	// ReplayAbsenceConfirmed: a believable lookup found nothing.
	ReplayAbsenceConfirmed ReplayResult = "absence_confirmed"
	// ReplayLookupFailed: the lookup itself failed.
	ReplayLookupFailed ReplayResult = "lookup_failed"
	// ReplayDuplicateEffect: the lookup found two or more effects for the
	// operation's key; the item stays with a person, who now has every
	// reference (Detail).
	ReplayDuplicateEffect ReplayResult = "duplicate_effect"
	// ReplayLedgerBehind: the announcement names an operation that no
	// tenant's ledger holds and that retention did not prune: committed
	// work was lost (a failover to an asynchronous replica, a restore),
	// and dispatch is paused for every tenant (ledger.PauseLedgerBehind;
	// a dry run pauses nothing).
	ReplayLedgerBehind ReplayResult = "ledger_behind"
)

// ReplayApplied is the result of a lookup's evidence that replay applied.
func ReplayApplied(outcome ledger.EvidenceOutcome) ReplayResult { return ReplayResult(outcome) }

// ReplaySummary counts a replay.
type ReplaySummary struct {
	Read      int  `json:"read"`      // review-stream messages read
	Items     int  `json:"items"`     // distinct items
	Open      int  `json:"open"`      // still open when looked at
	Changed   int  `json:"changed"`   // settled or given new facts
	Unchanged int  `json:"unchanged"` // left as they were
	DryRun    bool `json:"dry_run"`
}

// Replay re-reads the review stream of in's tenant and re-runs
// reconciliation (a lookup) for every item still open that in may see,
// calling emit for each as it goes. Items it can settle are settled; the
// rest are left for a person, and a second replay changes nothing more.
//
// It reads only the subject of the tenant's id, and emits nothing of
// another tenant even if an announcement of one were found there: an
// item's operation id, key and reason are that tenant's business. The
// subject holds every scope's items; a caller with a scope replays, and
// hears of, its own scope's only. tenantName is kept for callers; subjects
// never use it.
func (r *Reconciler) Replay(ctx context.Context, in ledger.Access, tenantName string, opts ReplayOptions, emit func(ReplayItem)) (ReplaySummary, error) {
	tenant := in.Tenant
	sum := ReplaySummary{DryRun: opts.DryRun}
	// An empty reason reads every reason's subject.
	reason := cmp.Or(string(opts.Reason), "*")
	var items []ledger.ReviewAnnouncement
	seen := make(map[string]bool)
	n, err := r.readReviewStream(ctx, ledger.ReviewSubject(r.broker.ReviewSubjectPrefix(), &tenant, reason), opts.Since, func(a ledger.ReviewAnnouncement) {
		id := string(a.Reason) + "/" + a.Key
		if a.OperationID != nil {
			id = a.OperationID.String()
		} else if a.EvidenceID != nil {
			id = fmt.Sprintf("evidence/%d", *a.EvidenceID)
		}
		if !seen[id] {
			seen[id] = true
			items = append(items, a)
		}
	})
	sum.Read += n
	if err != nil {
		return sum, err
	}
	for _, a := range items {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		item, err := r.replayOne(ctx, in, a, opts.DryRun)
		if errors.Is(err, errNotThisTenants) {
			if in.Scope == "" {
				// A caller with a scope skips the other scopes' items of
				// its tenant's subject as a matter of course; for one of
				// the whole tenant, the item is another tenant's.
				r.log.WarnContext(ctx, "review announcement of another tenant on this tenant's subject skipped",
					"tenant", tenantName, "operation_id", a.OperationID, "evidence_id", a.EvidenceID)
			}
			continue
		}
		if err != nil {
			return sum, err
		}
		sum.Items++
		if item.Result != ReplayAlreadyClosed {
			sum.Open++
		}
		if item.Changed {
			sum.Changed++
		} else {
			sum.Unchanged++
		}
		emit(item)
	}
	return sum, nil
}

// readReviewStream reads every message on subject from since with an
// ephemeral ordered consumer, until it has caught up.
func (r *Reconciler) readReviewStream(ctx context.Context, subject string, since time.Time, each func(ledger.ReviewAnnouncement)) (int, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if !since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := r.broker.JetStream().OrderedConsumer(ctx, r.broker.ReviewStream(), cfg)
	if err != nil {
		return 0, fmt.Errorf("replay: read review stream: %w", err)
	}
	read := 0
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
			// Nothing more within the wait: caught up.
			return read, nil
		}
		if err != nil {
			return read, fmt.Errorf("replay: read review stream: %w", err)
		}
		read++
		var a ledger.ReviewAnnouncement
		if json.Unmarshal(msg.Data(), &a) == nil {
			each(a)
		}
		if meta, err := msg.Metadata(); err == nil && meta.NumPending == 0 {
			return read, nil
		}
	}
}

// replayMissing judges an announcement of an operation the caller cannot
// see: another tenant's or scope's, one retention pruned, or one the
// ledger lost. The pause's statement tells the first from the last (it
// finds the operation in any tenant), the prune horizon the second.
func (r *Reconciler) replayMissing(ctx context.Context, item ReplayItem, id uuid.UUID, dryRun bool) (ReplayItem, error) {
	pruned, err := r.store.MayHaveBeenPruned(ctx, id)
	if err != nil {
		return item, err
	}
	if pruned {
		return item, errNotThisTenants
	}
	if dryRun {
		exists, err := r.store.OperationExists(ctx, id)
		if err != nil || exists {
			return item, cmp.Or(err, errNotThisTenants)
		}
		item.Result, item.Detail = ReplayLedgerBehind, "the ledger does not hold this operation: committed work was lost; a replay that is not a dry run pauses dispatch"
		return item, nil
	}
	b := ledger.Behind{Kind: "review", OperationID: id}
	paused, err := r.store.LedgerBehind(ctx, b)
	if errors.Is(err, ledger.ErrBehindNotProven) {
		return item, errNotThisTenants
	}
	if err != nil {
		return item, err
	}
	r.log.ErrorContext(ctx, "the ledger is behind its messages: committed work was lost (a failover or a restore); dispatch is paused for every tenant",
		"kind", b.Kind, "operation_id", id, "tenants_paused", paused)
	item.Result, item.Detail = ReplayLedgerBehind, "the ledger does not hold this operation: committed work was lost, and dispatch is paused for every tenant"
	return item, nil
}

// errNotThisTenants: an announcement names an operation or evidence that
// is not the replaying tenant's, or not of the replaying caller's scope.
var errNotThisTenants = errors.New("not this tenant's review item")

// replayOne re-runs reconciliation for one announced item.
func (r *Reconciler) replayOne(ctx context.Context, in ledger.Access, a ledger.ReviewAnnouncement, dryRun bool) (ReplayItem, error) {
	item := ReplayItem{OperationID: a.OperationID, EvidenceID: a.EvidenceID, Key: a.Key, Reason: a.Reason}
	if a.OperationID == nil {
		if a.EvidenceID == nil {
			return item, errNotThisTenants
		}
		owned, err := r.store.UnmatchedOwnedBy(ctx, in, *a.EvidenceID)
		if err != nil || !owned {
			return item, cmp.Or(err, errNotThisTenants)
		}
		item.Key = a.Reference
		item.Result, item.Detail = ReplayLeftForAPerson, "evidence that matches no operation is settled by an operator"
		return item, nil
	}
	op, err := r.store.Get(ctx, in, *a.OperationID)
	if errors.Is(err, ledger.ErrNotFound) {
		return r.replayMissing(ctx, item, *a.OperationID, dryRun)
	}
	if err != nil {
		return item, err
	}
	item.Key = op.Key
	if op.Status != ledger.StatusReview {
		item.Result, item.Detail = ReplayAlreadyClosed, "now "+string(op.Status)
		return item, nil
	}
	item.Reason = deref(op.ReviewReason)
	pc, ok := r.cfg.Registry.Provider(op.Provider)
	if !ok || pc.Lookup == nil {
		item.Result = ReplayNoLookup
		return item, nil
	}
	lookup, err := r.store.LookupOf(ctx, op, ledger.Target{Account: pc.Account, Environment: pc.Environment}, pc)
	if err != nil {
		return item, err
	}
	var lr provider.LookupResult
	verdict, err := ledger.JudgeLookup(lookup,
		func() (ledger.LookupAnswer, time.Time, error) {
			// Absence is judged as of the asking, however late the
			// answer comes back.
			asked := r.store.Now()
			lr = r.providers[op.Provider].Lookup(ctx, provider.LookupRequest{ExternalKey: op.ExternalKey, Params: op.Params})
			return ledger.LookupAnswer(lr.Status), asked, nil
		})
	if err != nil {
		return item, err
	}
	switch verdict {
	case ledger.LookupUntrusted:
		elsewhere := lookup.SentElsewhere[0]
		item.Result, item.Detail = ReplayLookupUntrusted, fmt.Sprintf("sent to account %q environment %q, which the provider's config no longer names", elsewhere.Account, elsewhere.Environment)
		return item, nil
	case ledger.LookupFound:
		if dryRun {
			item.Result, item.Detail = ReplayWouldSettleSucceeded, lr.ProviderReference
			return item, nil
		}
		outcome, err := r.Apply(ctx, Evidence{Source: "replay:lookup", Provider: op.Provider, Reference: op.ExternalKey,
			ProviderReference: lr.ProviderReference, Status: ledger.EvidenceSucceeded, Final: true})
		if err != nil {
			return item, err
		}
		item.Result, item.Detail, item.Changed = ReplayApplied(outcome), lr.ProviderReference, outcome != ledger.OutcomeNoChange
		return item, nil
	case ledger.LookupDuplicate:
		item.Result, item.Detail = ReplayDuplicateEffect, strings.Join(lr.References, ", ")
		return item, nil
	case ledger.LookupAbsentTooEarly:
		item.Result = ReplayAbsentNotYetBelievable
		return item, nil
	case ledger.LookupAbsentConfirmed:
		events, err := r.store.Events(ctx, in, op.ID)
		if err != nil {
			return item, err
		}
		item.Result = ReplayAbsenceConfirmed
		if ledger.Judge(events).AbsenceConfirmed || dryRun {
			return item, nil // already known: nothing new to record
		}
		item.Changed = true
		return item, r.store.AppendEvent(ctx, op.ID, ledger.EventReplayLookupAbsent, "reconciler:replay", lr.Evidence())
	default:
		item.Result, item.Detail = ReplayLookupFailed, lr.Error
		return item, nil
	}
}
