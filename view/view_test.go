package view_test

import (
	"encoding/json"
	"testing"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/view"
)

// TestAgentsNeverSeeSupplierAnswers: a reader without answers gets an
// event's detail without the supplier's body or webhook data, at the top
// and under "evidence"; a reader with answers (an operator, the archive)
// gets the detail as stored.
func TestAgentsNeverSeeSupplierAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		detail, without string
	}{
		{`{"class":"succeeded","body":"{\"customer\":\"Ada\"}"}`, `{"class":"succeeded"}`},
		{`{"evidence":{"data":{"email":"ada@example.com"},"status":"succeeded"},"source":"webhook"}`, `{"evidence":{"status":"succeeded"},"source":"webhook"}`},
		{`{"class":"retryable"}`, `{"class":"retryable"}`},
	}
	for _, tt := range tests {
		e := ledger.Event{Seq: 1, Kind: ledger.EventAttempt, To: ledger.StatusSucceeded, Detail: json.RawMessage(tt.detail)}
		if got := view.OfEvent(e, view.WithoutAnswers).Detail; !jsonEqual(t, got, tt.without) {
			t.Errorf("without answers %s: got %s, want %s", tt.detail, got, tt.without)
		}
		if got := view.OfEvent(e, view.WithAnswers).Detail; string(got) != tt.detail {
			t.Errorf("with answers %s: got %s", tt.detail, got)
		}
	}
}

func jsonEqual(t *testing.T, a json.RawMessage, b string) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		t.Fatalf("not JSON: %s or %s", a, b)
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}
