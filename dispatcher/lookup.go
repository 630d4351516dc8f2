package dispatcher

import (
	"context"
	"time"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// lookup asks the provider whether the operation's effect exists, trusting
// the answer only from the account and environment its requests went to
// (ledger.JudgeLookup on ledger.Store.LookupOf). The claim is confirmed
// first, like before a create; the answer is judged as of the
// confirmation (the lookup ran no earlier).
func (w *work) lookup(ctx context.Context) error {
	now := w.store.Now()
	here := targetOf(w.pc)
	lookup, err := w.store.LookupOf(ctx, w.op, here, w.pc)
	if err != nil {
		return err
	}
	var lr provider.LookupResult
	verdict, err := ledger.JudgeLookup(lookup,
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
			lr = w.p.Lookup(ctx, provider.LookupRequest{ExternalKey: w.op.ExternalKey, Params: w.op.Params})
			return ledger.LookupAnswer(lr.Status), now, nil
		})
	if w.superseded(ctx, err, "lookup") {
		return nil
	}
	if err != nil {
		return err
	}
	r := lookedUp{verdict: verdict, in: here, sentTo: lookup.SentElsewhere}
	if verdict != ledger.LookupUntrusted {
		r.reference, r.evidence = lr.ProviderReference, lr.Evidence()
		w.log.InfoContext(ctx, "looked up unknown outcome", "result", lr.Status, "http_status", lr.HTTPStatus)
	}
	return w.follow(ctx, w.decide(r, w.history(), now))
}
