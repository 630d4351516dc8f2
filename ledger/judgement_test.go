package ledger_test

import (
	"encoding/json"
	"testing"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

func event(kind ledger.EventKind, detail map[string]any) ledger.Event {
	raw, _ := json.Marshal(detail)
	return ledger.Event{Kind: kind, Detail: raw}
}

func attempt(class provider.Class) ledger.Event {
	return event(ledger.EventAttempt, map[string]any{"class": class})
}

// TestJudgementOfHistories is the one reading of "an earlier attempt may
// have had an effect", over the histories that decide it: the dispatcher
// (before it believes a refusal) and the reconciler (before a retry, and on
// every review item) both ask it.
func TestJudgementOfHistories(t *testing.T) {
	t.Parallel()
	absent := event(ledger.EventLookupAbsentConfirmed, map[string]any{"lookup": "absent"})
	tests := []struct {
		name                        string
		history                     []ledger.Event
		mayHave, confirmed, absence bool
	}{
		{"nothing sent", nil, false, false, false},
		{"refused before any effect", []ledger.Event{attempt(provider.ClassNotExecuted), attempt(provider.ClassRejected)}, false, false, false},
		{"unknown answer", []ledger.Event{attempt(provider.ClassUnknown)}, true, false, false},
		{"unknown, then a refusal of the resend", []ledger.Event{attempt(provider.ClassUnknown), attempt(provider.ClassRejected)}, true, false, false},
		{"unknown, then absence confirmed", []ledger.Event{attempt(provider.ClassUnknown), absent}, true, false, true},
		{"absence confirmed, then an unknown resend", []ledger.Event{attempt(provider.ClassUnknown), absent, attempt(provider.ClassUnknown)}, true, false, false},
		{"lease expired", []ledger.Event{event(ledger.EventLeaseExpired, nil)}, true, false, false},
		{"lease expired, then a replay found nothing", []ledger.Event{event(ledger.EventLeaseExpired, nil), event(ledger.EventReplayLookupAbsent, nil)}, true, false, true},
		{"recovered after the ledger lost changes", []ledger.Event{event(ledger.EventLedgerRecovery, nil)}, true, false, false},
		{"refused before any effect, then recovered", []ledger.Event{attempt(provider.ClassNotExecuted), event(ledger.EventLedgerRecovery, nil)}, true, false, false},
		{"recovered, then a lookup found nothing", []ledger.Event{event(ledger.EventLedgerRecovery, nil), absent}, true, false, true},
		{"a success", []ledger.Event{attempt(provider.ClassSucceeded)}, true, true, false},
		{"a fenced worker's late success", []ledger.Event{event(ledger.EventStaleResult, map[string]any{"would_be": ledger.StatusSucceeded})}, true, true, false},
		{"a fenced worker's late timeout", []ledger.Event{event(ledger.EventStaleResult, map[string]any{"would_be": ledger.StatusUnknown})}, true, false, false},
		{"a lookup found it, then a later lookup found nothing", []ledger.Event{event(ledger.EventLookupFound, nil), absent}, true, true, true},
		{"a webhook said succeeded", []ledger.Event{event(ledger.EventEvidence, map[string]any{"status": ledger.EvidenceSucceeded})}, true, true, false},
		{"a webhook said failed", []ledger.Event{event(ledger.EventEvidence, map[string]any{"status": ledger.EvidenceFailed})}, false, false, false},
		{"a lookup too early, or failing, settles nothing", []ledger.Event{attempt(provider.ClassUnknown),
			event(ledger.EventLookupAbsentTooEarly, nil), event(ledger.EventLookupFailed, nil)}, true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := ledger.Judge(tt.history)
			if j.MayHaveHadEffect != tt.mayHave || j.EffectConfirmed != tt.confirmed || j.AbsenceConfirmed != tt.absence {
				t.Errorf("may have had effect %v, confirmed %v, absence %v; want %v, %v, %v",
					j.MayHaveHadEffect, j.EffectConfirmed, j.AbsenceConfirmed, tt.mayHave, tt.confirmed, tt.absence)
			}
			if want := tt.mayHave && !tt.absence; j.Open() != want {
				t.Errorf("open %v, want %v", j.Open(), want)
			}
		})
	}
}
