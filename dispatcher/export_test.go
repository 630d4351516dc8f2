package dispatcher

import "github.com/actledger/actledger/ledger"

// SetCrashAfterCall makes workers stop dead right after the provider call
// when crash returns true, as a killed process would.
func (d *Dispatcher) SetCrashAfterCall(crash func(ledger.Operation) bool) { d.crashAfterCall = crash }
