// Package drill proves one integration before an agent gets autonomy: it runs the contract's
// failure scenarios (a lost answer, a 500 after commit, a re-planning agent, concurrent requests,
// a lost worker, changed params, an approval that expires while the outcome is unknown, an empty
// lookup inside the visibility lag) against a provider exactly as its providers file configures
// it, and counts the effects at the supplier itself.
//
// Why it exists: `make test` proves actledger's promise against actledger's own fakes; a team
// about to let an agent write to its payments or its ticketing needs the same proof on its
// supplier, its account, its params and its supplier's idempotency behaviour, and a report it can
// hand to a reviewer or fail a build on.
//
// What it holds to: the pipeline under test is the one `actledger serve` runs (app.Build: the
// HTTP API, the ledger, the relay, JetStream, the dispatchers, the lease sweeper and the
// reconciler) on a ledger of the drill's own, never a production one; the faults are injected
// inside actledger, between its provider client and the supplier (provider.HTTPOptions.Wrap), so
// every request really reaches the supplier and is answered before the answer is lost, replaced
// or held. A verdict comes only from what the supplier holds, counted through the provider's own
// lookup or reconcile list, never from the ledger's belief; with neither, the verdict is "not
// established" and the report lists the references to check by hand. It never reports a pass it
// did not observe, and it never sends to a provider whose environment is production unless told
// to.
package drill
