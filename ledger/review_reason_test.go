package ledger_test

import (
	"os"
	"strings"
	"testing"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// TestREADMEListsEveryReviewReason keeps the operators' list of review
// reasons (README.md, "Review reasons:") true to the one definition.
func TestREADMEListsEveryReviewReason(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(readme), "Review reasons:")
	if !ok {
		t.Fatal(`README.md has no "Review reasons:" list`)
	}
	list, _, _ = strings.Cut(list, "\n\n")
	for _, r := range ledger.ReviewReasons {
		if !strings.Contains(list, "`"+string(r)+"`") {
			t.Errorf("README.md's review reasons do not list %s", r)
		}
	}
}

// TestProviderReviewCodesAreReviewReasons holds the review reasons a
// provider gives with a result (provider.Result.Review) to the ledger's,
// which the dispatcher converts one to the other.
func TestProviderReviewCodesAreReviewReasons(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		got  string
		want ledger.ReviewReason
	}{
		{provider.ReviewProviderConfigError, ledger.ReasonProviderConfigError},
		{provider.ReviewProviderOutcome, ledger.ReasonProviderOutcome},
		{provider.ReviewReferenceMissing, ledger.ReasonReferenceMissing},
	} {
		if tt.got != string(tt.want) {
			t.Errorf("provider review %q, ledger reason %q; want the same word", tt.got, tt.want)
		}
	}
}
