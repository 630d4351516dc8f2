package dispatcher

import (
	"context"

	"github.com/actledger/actledger/ledger"
)

// Execute does what the ledger says the operation of dispatch message m
// (from providerName's consumer) needs now, as a worker would on receiving
// it (see execute), for tests that hand a worker a message of their own.
func (d *Dispatcher) Execute(ctx context.Context, providerName string, m ledger.Dispatch) error {
	return d.execute(ctx, providerName, m, nil)
}

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
