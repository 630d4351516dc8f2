package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// TestLookupVerdicts is the one rule for believing a lookup, which the
// dispatcher and a replay both follow: a lookup in another account or
// environment than the operation went to is never asked, a found effect is
// believed whenever it comes, and an absence only once the visibility lag
// after the last send has passed at the moment of asking.
func TestLookupVerdicts(t *testing.T) {
	t.Parallel()
	lastSent := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	believable := lastSent.Add(2 * time.Second) // a visibility lag of 2s
	elsewhere := []ledger.Target{{Account: "acct_old", Environment: "test"}}
	tests := []struct {
		name      string
		lookup    ledger.Lookup
		answer    ledger.LookupAnswer
		asked     time.Time
		want      ledger.LookupVerdict
		wantAsked bool
	}{
		{"found before the lag has passed is believed", ledger.Lookup{BelievableAt: believable}, ledger.LookupAnswerFound, lastSent, ledger.LookupFound, true},
		{"found after the lag is believed", ledger.Lookup{BelievableAt: believable}, ledger.LookupAnswerFound, believable.Add(time.Hour), ledger.LookupFound, true},
		{"absent before the lag has passed is too early", ledger.Lookup{BelievableAt: believable}, ledger.LookupAnswerAbsent, believable.Add(-time.Millisecond), ledger.LookupAbsentTooEarly, true},
		{"absent right after the last send is too early", ledger.Lookup{BelievableAt: believable}, ledger.LookupAnswerAbsent, lastSent, ledger.LookupAbsentTooEarly, true},
		{"absent once the lag has passed is believed", ledger.Lookup{BelievableAt: believable}, ledger.LookupAnswerAbsent, believable, ledger.LookupAbsentConfirmed, true},
		{"absent long after the lag is believed", ledger.Lookup{BelievableAt: believable}, ledger.LookupAnswerAbsent, believable.Add(time.Hour), ledger.LookupAbsentConfirmed, true},
		{"absent of an operation never sent is believed at once", ledger.Lookup{}, ledger.LookupAnswerAbsent, lastSent, ledger.LookupAbsentConfirmed, true},
		{"two effects before the lag are a duplicate", ledger.Lookup{BelievableAt: believable}, ledger.LookupAnswerDuplicate, lastSent, ledger.LookupDuplicate, true},
		{"an inconclusive answer long after the lag is never absent", ledger.Lookup{BelievableAt: believable}, ledger.LookupAnswerInconclusive, believable.Add(time.Hour), ledger.LookupInconclusive, true},
		{"a failed lookup settles nothing", ledger.Lookup{BelievableAt: believable}, ledger.LookupAnswerError, believable.Add(time.Hour), ledger.LookupFailed, true},
		{"an answer the ledger does not know settles nothing", ledger.Lookup{BelievableAt: believable}, "maybe", believable.Add(time.Hour), ledger.LookupFailed, true},
		{"sent to another account: untrusted, and the provider is not asked", ledger.Lookup{SentElsewhere: elsewhere, BelievableAt: believable}, ledger.LookupAnswerAbsent, believable.Add(time.Hour), ledger.LookupUntrusted, false},
		{"sent to another account: even a found effect is not asked for", ledger.Lookup{SentElsewhere: elsewhere}, ledger.LookupAnswerFound, believable, ledger.LookupUntrusted, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			asked := false
			got, err := ledger.JudgeLookup(tt.lookup, func() (ledger.LookupAnswer, time.Time, error) {
				asked = true
				return tt.answer, tt.asked, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || asked != tt.wantAsked {
				t.Errorf("verdict %q, provider asked %v; want %q, %v", got, asked, tt.want, tt.wantAsked)
			}
		})
	}
}

// TestLookupVerdictOfAFailedAskIsItsError: a lookup that could not be
// asked (the claim was lost, the context ended) has no verdict.
func TestLookupVerdictOfAFailedAskIsItsError(t *testing.T) {
	t.Parallel()
	lost := errors.New("claim lost")
	got, err := ledger.JudgeLookup(ledger.Lookup{}, func() (ledger.LookupAnswer, time.Time, error) {
		return "", time.Time{}, lost
	})
	if !errors.Is(err, lost) || got != "" {
		t.Errorf("verdict %q, err %v; want none and %v", got, err, lost)
	}
}

// TestLookupAnswersAreProviderLookupStatuses holds the ledger's words for a
// lookup's answer to package provider's, which the ledger does not import:
// callers convert one to the other.
func TestLookupAnswersAreProviderLookupStatuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		got  ledger.LookupAnswer
		want provider.LookupStatus
	}{
		{ledger.LookupAnswerFound, provider.LookupFound},
		{ledger.LookupAnswerAbsent, provider.LookupAbsent},
		{ledger.LookupAnswerError, provider.LookupError},
		{ledger.LookupAnswerDuplicate, provider.LookupDuplicate},
		{ledger.LookupAnswerInconclusive, provider.LookupInconclusive},
	}
	for _, tt := range tests {
		if string(tt.got) != string(tt.want) {
			t.Errorf("ledger answer %q, provider status %q; want the same word", tt.got, tt.want)
		}
	}
}

// TestAbsenceBelievableAtIsTheLagAfterTheLastSend reads when an absence
// becomes believable the one way the dispatcher and a replay both use, on
// a provider's own config: its visibility lag after the last send, and at
// once (zero) for an operation nothing was sent for.
func TestAbsenceBelievableAtIsTheLagAfterTheLastSend(t *testing.T) {
	t.Parallel()
	lastSent := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pc := &provider.Config{Lookup: &provider.Lookup{Path: "/o/{reference}", VisibilityLag: provider.Duration{Duration: 2 * time.Second}}}
	if got, want := ledger.AbsenceBelievableAt(ledger.Operation{LastSentAt: &lastSent}, pc), lastSent.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("sent: believable at %v, want %v", got, want)
	}
	if got := ledger.AbsenceBelievableAt(ledger.Operation{}, pc); !got.IsZero() {
		t.Errorf("never sent: believable at %v, want zero", got)
	}
}
