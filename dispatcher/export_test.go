package dispatcher

import "github.com/actledger/actledger/ledger"

// SetCrashAfterCall makes workers stop dead right after the provider call
// when crash returns true, as a killed process would.
func (d *Dispatcher) SetCrashAfterCall(crash func(ledger.Operation) bool) {
	d.crashAfterCall.Store(&crash)
}

// SetStallAfterCall makes workers run stall between the provider call and
// recording its answer.
func (d *Dispatcher) SetStallAfterCall(stall func(ledger.Operation)) { d.stallAfterCall.Store(&stall) }

// SetAfterClaim makes workers run hold between a claim's statement and
// the work done under it.
func (d *Dispatcher) SetAfterClaim(hold func(ledger.Operation)) { d.afterClaim.Store(&hold) }
