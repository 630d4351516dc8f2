package ledger_test

import (
	"os"
	"strings"
	"testing"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// TestOperatorsDocListsEveryReviewReason keeps the operators' list of
// review reasons (docs/operators.md, "Review reasons:") true to the one
// definition.
func TestOperatorsDocListsEveryReviewReason(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/operators.md")
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(doc), "Review reasons:")
	if !ok {
		t.Fatal(`docs/operators.md has no "Review reasons:" list`)
	}
	list, _, _ = strings.Cut(list, "\n\n")
	for _, r := range ledger.ReviewReasons {
		if !strings.Contains(list, "`"+string(r)+"`") {
			t.Errorf("docs/operators.md's review reasons do not list %s", r)
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
