package broker_test

import (
	"testing"

	"github.com/actledger/actledger/internal/testnats"
)

func TestEvidenceProviderReadsOnlyThisBrokersEvidenceSubjects(t *testing.T) {
	t.Parallel()
	b := testnats.New(t)
	tests := []struct{ subject, want string }{
		{b.EvidenceSubject("acme"), "acme"},
		{b.Prefix() + ".evidence.acme.x", ""},
		{"OTHER.evidence.acme", ""},
		{b.Prefix() + ".evidence.", ""},
	}
	for _, tt := range tests {
		if got := b.EvidenceProvider(tt.subject); got != tt.want {
			t.Errorf("EvidenceProvider(%q) = %q, want %q", tt.subject, got, tt.want)
		}
	}
}
