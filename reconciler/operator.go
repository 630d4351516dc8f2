package reconciler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/ledger"
)

// Errors operators' requests branch on.
var (
	// ErrNotResolvable: the operation is not in a state an operator may
	// settle (it is being worked on, or already settled).
	ErrNotResolvable = errors.New("reconciler: operation is not awaiting a decision")
	// ErrRetryNotAllowed: a retry needs a confirmed absence of effect and a
	// valid approval.
	ErrRetryNotAllowed = errors.New("reconciler: retry not allowed")
	// ErrBadResolution: the resolution itself is incomplete.
	ErrBadResolution = errors.New("reconciler: bad resolution")
)

// ReviewItem is one thing waiting for a person, with what is known.
type ReviewItem struct {
	OperationID *uuid.UUID `json:"operation_id"`
	EvidenceID  *int64     `json:"evidence_id,omitempty"`
	Action      string     `json:"action"`
	Key         string     `json:"key"`
	ClientKey   string     `json:"client_key,omitempty"`
	// Scope is the access scope of the operation; empty when it has none
	// (and for unmatched evidence, which belongs to the tenant).
	Scope               string              `json:"scope,omitempty"`
	Provider            string              `json:"provider"`
	Status              string              `json:"status"`
	Reason              ledger.ReviewReason `json:"reason"`
	Owner               string              `json:"owner"`
	Deadline            *time.Time          `json:"deadline"`
	AgeSeconds          float64             `json:"age_seconds"`
	Attempts            int                 `json:"attempts"`
	Facts               map[string]any      `json:"facts"`
	LastProviderAnswer  map[string]any      `json:"last_provider_answer"`
	RetryAllowed        bool                `json:"retry_allowed"`
	LookupReliableAfter *time.Time          `json:"lookup_reliable_after"`
}

// retryAllowed: the approval stands, no effect was ever confirmed, and
// either nothing can have had an effect or a believable lookup found none.
func retryAllowed(j ledger.Judgement, op ledger.Operation, lapse ledger.Lapse) bool {
	return lapse == ledger.LapseNone && !j.EffectConfirmed && op.ProviderReference == nil && !j.Open()
}

// ReviewCursor is where a page of review items ended. Operations in review
// come first (longest waiting first), then unmatched evidence (oldest
// first).
type ReviewCursor struct {
	// Evidence: the page ended in (or just before) unmatched evidence.
	Evidence bool `json:"e,omitempty"`
	// Operation is the last operation listed; nil with Evidence.
	Operation *ledger.Position `json:"o,omitempty"`
	// Unmatched is the last evidence listed; nil at the start of the
	// evidence.
	Unmatched *ledger.EvidencePosition `json:"u,omitempty"`
}

// ReviewPage lists at most limit of the open review items in may see after
// cursor after (nil: from the first), and the cursor of the next page (nil
// when this is the last): with a scope, its scope's operations only, and no
// unmatched evidence (which has none). However many items a page holds, it
// costs four queries: the operations, their histories, their approvals'
// standing, and the unmatched evidence.
func (r *Reconciler) ReviewPage(ctx context.Context, in ledger.Access, after *ReviewCursor, limit int) ([]ReviewItem, *ReviewCursor, error) {
	now := r.store.Now()
	items := make([]ReviewItem, 0, limit)
	var afterEvidence *ledger.EvidencePosition
	if after != nil && after.Evidence {
		afterEvidence = after.Unmatched
	} else {
		var afterOp *ledger.Position
		if after != nil {
			afterOp = after.Operation
		}
		ops, err := r.store.InReview(ctx, in, afterOp, limit+1)
		if err != nil {
			return nil, nil, err
		}
		more := len(ops) > limit
		ops = ops[:min(len(ops), limit)]
		opItems, err := r.reviewItems(ctx, in, ops, now)
		if err != nil {
			return nil, nil, err
		}
		items = append(items, opItems...)
		if more {
			last := ops[len(ops)-1]
			return items, &ReviewCursor{Operation: &ledger.Position{At: last.UpdatedAt, ID: last.ID}}, nil
		}
	}
	room := limit - len(items)
	unmatched, err := r.store.OpenUnmatched(ctx, in, afterEvidence, room+1)
	if err != nil {
		return nil, nil, err
	}
	var next *ReviewCursor
	if len(unmatched) > room {
		unmatched = unmatched[:room]
		next = &ReviewCursor{Evidence: true, Unmatched: afterEvidence}
		if room > 0 {
			last := unmatched[room-1]
			next.Unmatched = &ledger.EvidencePosition{At: last.CreatedAt, ID: last.ID}
		}
	}
	for _, u := range unmatched {
		facts := map[string]any{"source": u.Source, "reference": u.Reference, "status": u.Status}
		if u.ProviderReference != nil {
			facts["provider_reference"] = *u.ProviderReference
		}
		// Kept as stored: decoding it would round its large integers.
		if d := bytes.TrimSpace(u.Detail); json.Valid(d) && !bytes.Equal(d, []byte("null")) {
			facts["data"] = json.RawMessage(d)
		}
		items = append(items, ReviewItem{
			EvidenceID: &u.ID, Key: u.Reference, Provider: u.Provider, Status: string(ledger.StatusReview),
			Reason: ledger.ReasonUnmatchedEvidence, Owner: u.Owner, Deadline: utc(&u.Deadline),
			AgeSeconds: now.Sub(u.CreatedAt).Round(time.Second).Seconds(), Facts: facts,
		})
	}
	return items, next, nil
}

// reviewItems builds the review items of ops, reading their histories and
// their approvals' standing in one query each.
func (r *Reconciler) reviewItems(ctx context.Context, in ledger.Access, ops []ledger.Operation, now time.Time) ([]ReviewItem, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	ids := make([]uuid.UUID, len(ops))
	for i, op := range ops {
		ids[i] = op.ID
	}
	events, err := r.store.EventsOf(ctx, in, ids)
	if err != nil {
		return nil, err
	}
	lapses, err := r.store.Lapses(ctx, ids)
	if err != nil {
		return nil, err
	}
	items := make([]ReviewItem, len(ops))
	for i, op := range ops {
		items[i] = r.reviewItem(op, events[op.ID], lapses[op.ID], now)
	}
	return items, nil
}

func (r *Reconciler) reviewItem(op ledger.Operation, events []ledger.Event, lapse ledger.Lapse, now time.Time) ReviewItem {
	j := ledger.Judge(events)
	facts := map[string]any{
		"attempts": op.Attempts, "may_have_had_effect": j.MayHaveHadEffect,
		"absence_confirmed": j.AbsenceConfirmed, "effect_confirmed": j.EffectConfirmed, "approval_valid": lapse == ledger.LapseNone,
		"external_key": op.ExternalKey, "params": op.Params,
	}
	if lapse != ledger.LapseNone {
		facts["approval_lapse"] = lapse
	}
	if op.FirstSentAt != nil {
		facts["first_sent_at"] = op.FirstSentAt.UTC()
	}
	if op.LastSentAt != nil {
		facts["last_sent_at"] = op.LastSentAt.UTC()
	}
	if op.ProviderReference != nil {
		facts["provider_reference"] = *op.ProviderReference
	}
	if j.LastLookup != nil {
		facts["last_lookup"] = j.LastLookup
	}
	item := ReviewItem{
		OperationID: &op.ID, Action: op.Action, Key: op.Key, ClientKey: deref(op.ClientKey), Scope: deref(op.Scope), Provider: op.Provider, Status: string(op.Status),
		Reason: deref(op.ReviewReason), Owner: deref(op.ReviewOwner), Deadline: utc(op.ReviewDeadline),
		AgeSeconds: now.Sub(op.UpdatedAt).Round(time.Second).Seconds(), Attempts: op.Attempts,
		Facts: facts, LastProviderAnswer: j.LastAnswer,
		RetryAllowed: retryAllowed(j, op, lapse),
	}
	if pc, ok := r.cfg.Registry.Provider(op.Provider); ok && pc.Lookup != nil && op.LastSentAt != nil {
		at := ledger.AbsenceBelievableAt(op, pc).UTC()
		item.LookupReliableAfter = &at
	}
	return item
}

// Resolution is an operator's decision on an operation.
type Resolution struct {
	// Outcome is "succeeded" (ProviderReference required), "failed"
	// (confirmed no effect) or "cancelled".
	Outcome           string `json:"outcome"`
	ProviderReference string `json:"provider_reference"`
	Note              string `json:"note"`
	// Compensation, when set, creates a separate, linked operation (its
	// own key and approval) to undo or correct the effect; it never
	// reuses the original's identity.
	Compensation *Compensation `json:"compensation"`
}

// Compensation is a new operation created alongside a resolution. When its
// action declares a business key, the operation's key is the one derived
// from Params, as for an agent's request, and Key is kept as its client
// key: an operator's refund of a refund request is the agent's refund of
// it, never a second one.
type Compensation struct {
	Action     string          `json:"action"`
	Key        string          `json:"key"`
	Params     json.RawMessage `json:"params"`
	ApprovalID uuid.UUID       `json:"approval_id"`
}

// resolvable are the states an operator may settle: nothing is in flight
// and no outcome is confirmed.
var resolvable = []ledger.Status{ledger.StatusReview, ledger.StatusUnknown, ledger.StatusHeld, ledger.StatusQueued, ledger.StatusRetryWait}

// Resolve settles operation id, which in must see, as the operator
// decides. It returns the operation and, with a compensation, the new
// linked one, which takes the operation's scope: it belongs to the same
// department's business, whoever resolved it. A person (tokenID
// uuid.Nil: a signed-in session has no token) has the compensation
// requested under the token that requested the operation it compensates,
// so that token's revocation holds it like the rest of that token's
// unsent work; its events name the person (actor).
func (r *Reconciler) Resolve(ctx context.Context, in ledger.Access, tokenID uuid.UUID, actor string, id uuid.UUID, res Resolution) (ledger.Operation, *ledger.Operation, error) {
	to := ledger.Status(res.Outcome)
	switch {
	case to != ledger.StatusSucceeded && to != ledger.StatusFailed && to != ledger.StatusCancelled:
		return ledger.Operation{}, nil, fmt.Errorf("%w: outcome must be succeeded, failed or cancelled", ErrBadResolution)
	case to == ledger.StatusSucceeded && res.ProviderReference == "":
		return ledger.Operation{}, nil, fmt.Errorf("%w: a succeeded resolution needs the provider_reference", ErrBadResolution)
	}
	op, err := r.store.Get(ctx, in, id)
	if err != nil {
		return ledger.Operation{}, nil, err
	}
	if !slices.Contains(resolvable, op.Status) || !op.Status.CanMoveTo(to) {
		return op, nil, fmt.Errorf("%w: it is %s", ErrNotResolvable, op.Status)
	}
	var pcName, compKey, compClientKey string
	if c := res.Compensation; c != nil {
		var ok bool
		if pcName, ok = r.actionProvider(c.Action); !ok {
			return op, nil, fmt.Errorf("%w: compensation action %q is not configured", ErrBadResolution, c.Action)
		}
		contract, _ := r.cfg.Registry.Action(c.Action)
		if compKey, compClientKey, err = contract.OperationKey(ctx, c.Params, op.Tenant, c.Key); err != nil {
			return op, nil, fmt.Errorf("compensation: %w", err)
		}
	}
	// The resolution and its compensation commit together or not at all:
	// a compensation whose resolution failed would be sent for an effect
	// nobody settled, and a resolution whose compensation failed would
	// leave the effect it meant to undo standing.
	requester := tokenID
	if requester == uuid.Nil {
		requester = op.RequestedBy
	}
	var done ledger.Operation
	var comp *ledger.Operation
	err = r.store.InTx(ctx, func(tx *ledger.Tx) error {
		comp = nil
		detail := map[string]any{"outcome": res.Outcome, "note": res.Note}
		if res.Compensation != nil {
			c, _, err := r.store.EnqueueTx(ctx, tx, ledger.EnqueueRequest{
				TenantID: op.TenantID, TokenID: requester, Actor: actor, Action: res.Compensation.Action, Key: compKey, ClientKey: compClientKey,
				Scope:    deref(op.Scope),
				Provider: pcName, Params: res.Compensation.Params, ApprovalID: res.Compensation.ApprovalID,
			})
			if err != nil {
				return fmt.Errorf("compensation: %w", err)
			}
			if err := r.store.AppendEventTx(ctx, tx, c.ID, ledger.EventCompensationFor, actor, map[string]any{"operation_id": op.ID}); err != nil {
				return err
			}
			comp = &c
			detail["compensation_operation_id"] = c.ID
		}
		var err error
		done, err = r.store.TransitionTx(ctx, tx, ledger.Change{
			ID: op.ID, From: op.Status, Version: op.Version, To: to, Kind: ledger.EventResolved, Actor: actor,
			ProviderReference: res.ProviderReference, Detail: detail,
		})
		return err
	})
	if errors.Is(err, ledger.ErrStale) {
		// Another decision or the pipeline moved it since it was read: a
		// concurrent resolve lost, and is told so like any late one.
		return op, nil, fmt.Errorf("%w: it changed meanwhile (%v)", ErrNotResolvable, err)
	}
	if err != nil {
		return op, nil, err
	}
	r.log.InfoContext(ctx, "operator resolved operation", "operation_id", op.ID, "tenant", op.Tenant, "outcome", res.Outcome, "by", actor)
	return done, comp, nil
}

func (r *Reconciler) actionProvider(action string) (string, bool) {
	pc, ok := r.cfg.Registry.ForAction(action)
	if !ok {
		return "", false
	}
	return pc.Name, true
}

// ResolveEvidence closes an unmatched evidence item in may see (only a
// caller of the whole tenant sees any) with a note.
func (r *Reconciler) ResolveEvidence(ctx context.Context, in ledger.Access, actor string, id int64, note string) error {
	return r.store.ResolveUnmatched(ctx, in, id, actor, note)
}

// Retry sends operation id, which in must see, again with the same
// external key, when that is safe: it failed or waits in review, and either
// no attempt can have had an effect or a lookup confirmed absence since; and
// its approval still stands. The retry gets a fresh retry budget.
func (r *Reconciler) Retry(ctx context.Context, in ledger.Access, actor string, id uuid.UUID, note string) (ledger.Operation, error) {
	op, err := r.store.Get(ctx, in, id)
	if err != nil {
		return op, err
	}
	if op.Status != ledger.StatusFailed && op.Status != ledger.StatusReview {
		return op, fmt.Errorf("%w: only failed operations and review items may be retried; it is %s", ErrRetryNotAllowed, op.Status)
	}
	lapse, err := r.store.CheckLapse(ctx, op.ID)
	if err != nil {
		return op, err
	}
	if lapse != ledger.LapseNone {
		return op, fmt.Errorf("%w: the approval no longer stands (%s)", ErrRetryNotAllowed, lapse)
	}
	// A failed operation is judged like a review item: a definite refusal
	// after an attempt whose outcome was unknown says nothing about that
	// attempt's effect (operations recorded failed that way before the
	// dispatcher sent them to review must not be sent again blindly).
	events, err := r.store.Events(ctx, in, op.ID)
	if err != nil {
		return op, err
	}
	j := ledger.Judge(events)
	if j.EffectConfirmed || op.ProviderReference != nil {
		return op, fmt.Errorf("%w: the provider confirmed an effect of this operation; it is never sent again", ErrRetryNotAllowed)
	}
	if j.Open() {
		return op, fmt.Errorf("%w: an earlier attempt may have had an effect and no lookup confirmed its absence", ErrRetryNotAllowed)
	}
	// Queued waits for a dispatch message: the ledger writes it with the
	// change.
	out, err := r.store.Transition(ctx, ledger.Change{
		ID: op.ID, From: op.Status, Version: op.Version, To: ledger.StatusQueued, Kind: ledger.EventOperatorRetry,
		Actor: actor, ResetRetryBudget: true, Detail: map[string]any{"note": note},
	})
	if errors.Is(err, ledger.ErrStale) {
		// It changed since it was judged (a concurrent retry or resolve, or
		// evidence): the judgement no longer holds.
		return op, fmt.Errorf("%w: it changed meanwhile (%v)", ErrRetryNotAllowed, err)
	}
	if err == nil {
		r.log.InfoContext(ctx, "operator retried operation", "operation_id", op.ID, "tenant", op.Tenant, "by", actor)
	}
	return out, err
}

// utc keeps every time the API shows in UTC, as the contract asks.
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
