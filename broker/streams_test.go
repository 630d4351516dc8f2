package broker_test

import (
	"testing"

	"github.com/actledger/actledger/broker"
)

func TestSubjectTokenKeepsSafeCharactersAndReplacesTheRest(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"acme-corp", "acme-corp"},
		{"Acme_Corp2", "Acme_Corp2"},
		{"acme.corp", "acme_corp"},
		{"Acme Inc.", "Acme_Inc_"},
		{"a*b>c", "a_b_c"},
		{"zürich", "z_rich"},
	}
	for _, tt := range tests {
		if got := broker.SubjectToken(tt.in); got != tt.want {
			t.Errorf("SubjectToken(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
