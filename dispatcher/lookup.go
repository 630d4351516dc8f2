package dispatcher

import (
	"context"
	"time"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// lookup asks the provider whether the operation's effect exists, trusting
// the answer only from the account and environment its requests went to
// (ledger.JudgeLookup). The claim is confirmed first, like before a
// create; the answer is judged as of the confirmation (the lookup ran no
// earlier).
func (w *work) lookup(ctx context.Context) error {
	now := w.store.Now()
	here := targetOf(w.pc)
	foreign, err := w.store.ForeignTargets(ctx, w.op.ID, here)
	if err != nil {
		return err
	}
	var lr provider.LookupResult
	verdict, err := ledger.JudgeLookup(ledger.Lookup{SentElsewhere: foreign, BelievableAt: absenceBelievableAt(w.op, w.pc)},
		func() (ledger.LookupAnswer, time.Time, error) {
			if err := w.takeCall(ctx); err != nil {
				return "", time.Time{}, err
			}
			defer w.releaseCall()
			slot, err := w.startCall(ctx)
			if err != nil {
				return "", time.Time{}, err
			}
			now = slot.confirmed
			lr = w.p.Lookup(ctx, w.op.ExternalKey)
			return ledger.LookupAnswer(lr.Status), now, nil
		})
	if w.superseded(ctx, err, "lookup") {
		return nil
	}
	if err != nil {
		return err
	}
	r := lookedUp{verdict: verdict, in: here, sentTo: foreign}
	if verdict != ledger.LookupUntrusted {
		r.reference, r.evidence = lr.ProviderReference, lookupEvidence(lr)
		w.log.InfoContext(ctx, "looked up unknown outcome", "result", lr.Status, "http_status", lr.HTTPStatus)
	}
	return w.follow(ctx, w.decide(r, w.history(), now))
}

// lookupEvidence is what a lookup event keeps: enough for a person to
// judge it later, never a whole body or a secret.
func lookupEvidence(r provider.LookupResult) map[string]any {
	e := map[string]any{"lookup": r.Status, "http_status": r.HTTPStatus, "at": r.At, "account": r.Account, "environment": r.Environment}
	if r.ProviderReference != "" {
		e["provider_reference"] = r.ProviderReference
	}
	if len(r.References) > 0 {
		e["references"] = r.References
	}
	if r.Error != "" {
		e["error"] = r.Error
	}
	if r.Body != "" {
		e["body"] = r.Body
	}
	return e
}
