package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/actledger/actledger/client"
)

// approvalTTL is the lifetime of an approval a scenario does not let expire.
const approvalTTL = time.Hour

// faulted is lost_response and error_after_commit: one operation whose first create's answer
// meets ft (and, with emptyFor, whose lookups inside the lag answer none). It passes with one
// effect and the operation succeeded (or in review with the supplier's reference).
func (d *drill) faulted(ctx context.Context, s *Scenario, ft fault, emptyFor time.Duration, also func(ext string) []string) error {
	ap, err := d.approve(ctx, s.in, approvalTTL)
	if err != nil {
		return err
	}
	op, err := d.requestArmed(ctx, d.key(s.Name, ""), s.in, ap.ID, &ft, emptyFor)
	if err != nil {
		return err
	}
	final, ok, err := d.settled(ctx, op.ID)
	if err != nil {
		return err
	}
	if err := d.injected(op); err != nil {
		return err
	}
	t := d.observe(ctx, s, final, ok)
	add(s, t, true)
	var why []string
	why = oneEffect(why, t, "the operation")
	if t.n != nil && *t.n > 1 && d.pc.Idempotency != nil {
		why = append(why, fmt.Sprintf("actledger resent with the same %s header, as the providers file's idempotency section promises is safe, and the supplier made a new effect: it does not honour the header (fix the supplier's idempotency, or remove idempotency: from the providers file so that actledger looks up instead of resending)", d.pc.Idempotency.Header))
	}
	if !d.endedWell(final) && ok {
		why = append(why, fmt.Sprintf("the operation ended %s (%s), not succeeded", final.Status, reviewReason(final)))
	}
	if also != nil {
		why = append(why, also(op.ExternalKey)...)
	}
	judge(s, why, uncounted(t, final), t.problem)
	return nil
}

// emptyLookup is faulted with a lost answer and lookups answered none for the provider's
// visibility lag after the supplier committed: no create may follow a "none" answer.
func (d *drill) emptyLookup(ctx context.Context, s *Scenario) error {
	if d.pc.Lookup == nil {
		s.Why = "not applicable: the provider has no lookup, so no lookup can answer none; nothing was sent"
		s.State = "not run"
		return nil
	}
	lag := d.pc.Lookup.VisibilityLag.Duration
	return d.faulted(ctx, s, fault{kind: faultDrop}, lag, func(ext string) []string {
		st := d.p.faults.stats(ext)
		switch {
		case st.lookups == 0:
			s.notes = append(s.notes, "actledger asked no lookup: the outcome was settled otherwise (a resend under the idempotency key), so no lookup could answer none")
		case st.emptied == 0:
			s.notes = append(s.notes, fmt.Sprintf("actledger asked %d lookup(s), none within the visibility lag (%s) of the supplier's commit: it waits the lag after the latest moment the create may have landed", st.lookups, lag))
		default:
			s.notes = append(s.notes, fmt.Sprintf("%d of actledger's %d lookup(s) came within the visibility lag (%s) of the supplier's commit and were answered none", st.emptied, st.lookups, lag))
		}
		if st.sentAfterEmpty > 0 {
			return []string{fmt.Sprintf("%d create request(s) followed a lookup that answered none inside the visibility lag: an absence inside the lag proves nothing", st.sentAfterEmpty)}
		}
		return nil
	})
}

// replan: the intention again under a new client key with the same approval (a re-planning
// agent), then a control, separately approved, that must get its own effect.
func (d *drill) replan(ctx context.Context, s *Scenario) error {
	ap, err := d.approve(ctx, s.in, approvalTTL)
	if err != nil {
		return err
	}
	op, err := d.request(ctx, d.key(s.Name, "first"), s.in, ap.ID)
	if err != nil {
		return err
	}
	d.p.faults.watch(op.ExternalKey)
	first, ok, err := d.settled(ctx, op.ID)
	if err != nil {
		return err
	}
	var why []string
	t := d.observe(ctx, s, first, ok)
	add(s, t, true)
	why = oneEffect(why, t, "the first intention")
	var uncountedRefs []string
	uncountedRefs = append(uncountedRefs, uncounted(t, first)...)

	again, err := d.request(ctx, d.key(s.Name, "replanned"), s.in, ap.ID)
	switch {
	case err != nil:
		s.notes = append(s.notes, fmt.Sprintf("The same intention under a new client key was refused: %s", err))
	case again.ID == first.ID:
		s.notes = append(s.notes, "The same intention under a new client key answered the same operation (the action's business key)")
	default:
		d.p.faults.watch(again.ExternalKey)
		final, ok, err := d.settled(ctx, again.ID)
		if err != nil {
			return err
		}
		state, summary := s.State, s.Summary
		t2 := d.observe(ctx, s, final, ok)
		s.State, s.Summary = state, summary // the state shown is the first intention's
		add(s, t2, false)
		uncountedRefs = append(uncountedRefs, uncounted(t2, final)...)
		if t2.n == nil || *t2.n > 0 {
			why = append(why, fmt.Sprintf("the same intention under a new client key became a second operation (%s) that reached the supplier: declare the action's business key (key:) so that a re-planning agent gets the same operation", again.ID))
		}
	}

	control, reason := d.controlParams(s)
	if control == nil {
		s.notes = append(s.notes, "No control: "+reason)
	} else {
		ap2, err := d.approve(ctx, control, approvalTTL)
		if err != nil {
			return err
		}
		cop, err := d.request(ctx, d.key(s.Name, "control"), control, ap2.ID)
		if err != nil {
			why = append(why, fmt.Sprintf("the control, a separately approved intention (%s), was refused: %s", reason, err))
		} else {
			d.p.faults.watch(cop.ExternalKey)
			cfinal, ok, err := d.settled(ctx, cop.ID)
			if err != nil {
				return err
			}
			state, summary := s.State, s.Summary
			ct := d.observe(ctx, s, cfinal, ok)
			s.State, s.Summary = state, summary // the state shown is the first intention's
			uncountedRefs = append(uncountedRefs, uncounted(ct, cfinal)...)
			s.notes = append(s.notes, fmt.Sprintf("Control (%s): %s, %s effect(s)", reason, cfinal.Status, countText(ct)))
			if ct.n != nil && *ct.n != 1 {
				why = append(why, fmt.Sprintf("the control, a separately approved intention, has %d effects at the supplier, not its own one", *ct.n))
			}
			if cfinal.Status != client.StatusSucceeded {
				why = append(why, fmt.Sprintf("the control ended %s, not succeeded", cfinal.Status))
			}
		}
	}
	if s.Effects != nil && *s.Effects > 1 {
		why = append(why, fmt.Sprintf("one intention made %d effects at the supplier", *s.Effects))
	}
	judge(s, dedupe(why), uncountedRefs, t.problem)
	return nil
}

// controlParams are the control's params: with no business key, the same params (another key,
// another approval); with one, params that differ in what the key is made of.
func (d *drill) controlParams(s *Scenario) (json.RawMessage, string) {
	if d.keyField == "" {
		return s.in, "identical params under another key, as the action declares no business key"
	}
	return d.paramsFor(s.Name + "-control"), "params with another " + d.keyField + ", which gives another business key"
}

// concurrent: concurrentRequests identical requests at once; one operation, one effect.
func (d *drill) concurrent(ctx context.Context, s *Scenario) error {
	ap, err := d.approve(ctx, s.in, approvalTTL)
	if err != nil {
		return err
	}
	key := d.key(s.Name, "")
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		ids    = map[string]int{}
		errs   = map[string]int{}
		start  = make(chan struct{})
		anyOp  *client.Operation
		status = map[bool]int{}
	)
	for range concurrentRequests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			op, err := d.request(ctx, key, s.in, ap.ID)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[err.Error()]++
				return
			}
			ids[op.ID]++
			status[op.Replayed]++
			anyOp = op
		}()
	}
	close(start)
	wg.Wait()
	if anyOp == nil {
		return fmt.Errorf("every request was refused: %v", errs)
	}
	d.p.faults.watch(anyOp.ExternalKey)
	final, ok, err := d.settled(ctx, anyOp.ID)
	if err != nil {
		return err
	}
	t := d.observe(ctx, s, final, ok)
	add(s, t, true)
	s.notes = append(s.notes, fmt.Sprintf("%d requests: %d answered a new operation, %d a replay of it, %d refused", concurrentRequests, status[false], status[true], sum(errs)))
	var why []string
	if len(ids) > 1 {
		why = append(why, fmt.Sprintf("%d identical requests made %d operations", concurrentRequests, len(ids)))
	}
	for e, n := range errs {
		why = append(why, fmt.Sprintf("%d of the identical requests were refused (%s)", n, e))
	}
	why = oneEffect(why, t, "the intention")
	if ok && final.Status != client.StatusSucceeded {
		why = append(why, fmt.Sprintf("the operation ended %s, not succeeded", final.Status))
	}
	judge(s, why, uncounted(t, final), t.problem)
	return nil
}

// workerLost: the worker that sent the create stalls with the answer; its lease expires, the
// sweeper makes the outcome unknown, and another worker settles it. Then the stalled worker's
// answer is let through, late, to be fenced.
func (d *drill) workerLost(ctx context.Context, s *Scenario) error {
	ap, err := d.approve(ctx, s.in, approvalTTL)
	if err != nil {
		return err
	}
	op, err := d.requestArmed(ctx, d.key(s.Name, ""), s.in, ap.ID, &fault{kind: faultStall}, 0)
	if err != nil {
		return err
	}
	ext := op.ExternalKey
	defer d.p.faults.releaseStall(ext)
	wctx, cancel := context.WithTimeout(ctx, d.opts.Patience)
	err = d.p.faults.stalledOn(wctx, ext)
	cancel()
	if err != nil {
		return fmt.Errorf("no worker sent the create within %s: %w", d.opts.Patience, err)
	}
	d.progress("  the supplier answered; the worker stalls with the answer; its lease (%s) expires and the sweeper hands the operation on", d.p.lease)
	final, ok, err := d.settled(ctx, op.ID)
	if err != nil {
		return err
	}
	d.p.faults.releaseStall(ext)
	if err := d.injected(op); err != nil {
		return err
	}
	s.notes = append(s.notes, d.fenced(ctx, op.ID))
	// The late answer is evidence, and may have changed what the user sees (a second
	// reference is a duplicate_effect review).
	if now, err := d.p.agent.GetOperation(ctx, op.ID); err == nil {
		final = now
		ok = final.Status.Final() || final.Status == client.StatusReview
	}
	t := d.observe(ctx, s, final, ok)
	add(s, t, true)
	var why []string
	why = oneEffect(why, t, "the operation")
	st := d.p.faults.stats(ext)
	if st.sent > 1 && d.pc.Idempotency == nil {
		why = append(why, fmt.Sprintf("%d creates went out without an idempotency key to make a resend safe", st.sent))
	}
	if t.n != nil && *t.n > 1 && d.pc.Idempotency != nil {
		why = append(why, fmt.Sprintf("the worker that took over resent under the %s header and the supplier made a new effect: it does not honour the header", d.pc.Idempotency.Header))
	}
	if ok && !d.endedWell(final) {
		why = append(why, fmt.Sprintf("the operation ended %s (%s), not succeeded", final.Status, reviewReason(final)))
	}
	judge(s, why, uncounted(t, final), t.problem)
	return nil
}

// fenced says what became of the stalled worker's answer once it was let through: the ledger
// refuses it (its lease was lost) and keeps it as evidence, event stale_result.
func (d *drill) fenced(ctx context.Context, id string) string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		events, err := d.p.agent.AllOperationEvents(ctx, id)
		if err != nil {
			return "The stalled worker's late answer: the operation's history could not be read: " + err.Error()
		}
		var expired, stale bool
		for _, e := range events {
			expired = expired || e.Kind == "lease_expired"
			stale = stale || e.Kind == "stale_result"
		}
		switch {
		case expired && stale:
			return "The stalled worker's lease expired (event lease_expired); its answer, let through after another worker settled the operation, was refused by the fence and kept as evidence (event stale_result)"
		case time.Now().After(deadline):
			return fmt.Sprintf("The stalled worker's answer was let through; the history shows lease_expired %t, stale_result %t", expired, stale)
		}
		select {
		case <-ctx.Done():
			return "The drill was stopped before the stalled worker's answer was recorded"
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// changedParams: the same key with other params must be refused with 409, and nothing sent.
func (d *drill) changedParams(ctx context.Context, s *Scenario) error {
	ap, err := d.approve(ctx, s.in, approvalTTL)
	if err != nil {
		return err
	}
	key := d.key(s.Name, "")
	op, err := d.request(ctx, key, s.in, ap.ID)
	if err != nil {
		return err
	}
	d.p.faults.watch(op.ExternalKey)
	first, ok, err := d.settled(ctx, op.ID)
	if err != nil {
		return err
	}
	other, change := d.changed(ctx, s.in)
	var why []string
	if other == nil {
		s.notes = append(s.notes, "No changed params: "+change)
	} else {
		ap2, err := d.approve(ctx, other, approvalTTL)
		if err != nil {
			return err
		}
		before := d.p.faults.totalSent()
		_, err = d.request(ctx, key, other, ap2.ID)
		var apiErr *client.Error
		switch {
		case err == nil:
			why = append(why, "the same key with other params ("+change+") was accepted; it must be refused with 409")
		case !asAPIError(err, &apiErr) || apiErr.Status != http.StatusConflict:
			why = append(why, fmt.Sprintf("the same key with other params (%s) was answered %v, not 409", change, err))
		default:
			s.notes = append(s.notes, fmt.Sprintf("The same key with other params (%s): %d %s", change, apiErr.Status, apiErr.Code))
		}
		if n := d.p.faults.totalSent() - before; n > 0 {
			why = append(why, fmt.Sprintf("%d request(s) reached the supplier after the changed params", n))
		}
	}
	t := d.observe(ctx, s, first, ok)
	add(s, t, true)
	why = oneEffect(why, t, "the operation")
	judge(s, why, uncounted(t, first), t.problem)
	if other == nil && s.Passed != nil && *s.Passed {
		s.Passed, s.Why = nil, "could not be established: "+change
	}
	return nil
}

// changed are params the action accepts that differ from the drill's but keep its business key.
func (d *drill) changed(ctx context.Context, params json.RawMessage) (json.RawMessage, string) {
	contract, _ := d.opts.Registry.Action(d.opts.Action)
	key, _, _ := contract.BusinessKey(ctx, params, d.p.tenant)
	for _, v := range variants(params) {
		if contract.CheckParams(v.params) != nil {
			continue
		}
		if contract.HasBusinessKey() {
			if k, ok, err := contract.BusinessKey(ctx, v.params, d.p.tenant); err != nil || !ok || k != key {
				continue
			}
		}
		return v.params, v.change
	}
	return nil, "no change of one param gives params the action accepts (under the same business key); give params with a field that may change"
}

// expiredApproval: the approval ends while the first call's answer is held (the outcome becomes
// unknown at the call's timeout); nothing may be sent again, and the effect is found late.
func (d *drill) expiredApproval(ctx context.Context, s *Scenario) error {
	ap, err := d.approve(ctx, s.in, expiringApproval)
	if err != nil {
		return err
	}
	op, err := d.requestArmed(ctx, d.key(s.Name, ""), s.in, ap.ID, &fault{kind: faultHold, until: ap.ExpiresAt.Add(250 * time.Millisecond)}, 0)
	if err != nil {
		return err
	}
	ext := op.ExternalKey
	final, ok, err := d.settled(ctx, op.ID)
	if err != nil {
		return err
	}
	st := d.p.faults.stats(ext)
	if final.Status == client.StatusHeld && st.sent == 0 {
		d.p.faults.disarm()
	} else if err := d.injected(op); err != nil {
		return err
	}
	t := d.observe(ctx, s, final, ok)
	add(s, t, true)
	if final.Status == client.StatusHeld && st.sent == 0 {
		s.Why = fmt.Sprintf("not established: the operation was not sent before its %s approval expired (a slow start); run the scenario again", expiringApproval)
		return nil
	}
	var why []string
	why = oneEffect(why, t, "the operation")
	if st.sent > 1 {
		why = append(why, fmt.Sprintf("%d create requests went out; after the approval expired nothing may be sent again", st.sent))
	}
	if ok && !d.endedWell(final) {
		why = append(why, fmt.Sprintf("the late success was not reconciled: the operation ended %s (%s); a lookup or a webhook is what finds it", final.Status, reviewReason(final)))
	}
	judge(s, why, uncounted(t, final), t.problem)
	return nil
}

// uncounted is op's external key when t could not count it.
func uncounted(t tally, op *client.Operation) []string {
	if t.n == nil {
		return []string{op.ExternalKey}
	}
	return nil
}

func reviewReason(op *client.Operation) string {
	if op.Review != nil {
		return "review reason " + op.Review.Reason
	}
	return op.Summary
}

func countText(t tally) string {
	if t.n == nil {
		return "?"
	}
	return fmt.Sprint(*t.n)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func dedupe(xs []string) []string {
	var out []string
	for _, x := range xs {
		if len(out) == 0 || out[len(out)-1] != x {
			out = append(out, x)
		}
	}
	return out
}

// variant is params with one top-level field changed.
type variant struct {
	params json.RawMessage
	change string
}

// variants are the drill's params with one field changed at a time, in field order: a string
// gets "-drill" appended, a number one added (or taken), a boolean flipped.
func variants(params json.RawMessage) []variant {
	var obj map[string]any
	if json.Unmarshal(params, &obj) != nil {
		return nil
	}
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []variant
	for _, name := range names {
		var tries []any
		switch v := obj[name].(type) {
		case string:
			tries = []any{v + "-drill"}
		case float64:
			tries = []any{v + 1, v - 1}
		case bool:
			tries = []any{!v}
		}
		for _, try := range tries {
			c := make(map[string]any, len(obj))
			for k, v := range obj {
				c[k] = v
			}
			c[name] = try
			raw, _ := json.Marshal(c)
			out = append(out, variant{params: raw, change: fmt.Sprintf("%s %v instead of %v", name, jsonText(try), jsonText(obj[name]))})
		}
	}
	return out
}

func jsonText(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}
