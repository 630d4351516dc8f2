package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/actledger/actledger/ledger"
)

// TestExplicitNullOptionalFieldsAnswerAsIfOmitted: a client that writes
// an optional field as null (as many JSON encoders do for a field without
// value) is answered as if it had left the field out, and the OpenAPI
// document says so: every such request conforms to it (the fixture checks
// each request and answer against the document).
func TestExplicitNullOptionalFieldsAnswerAsIfOmitted(t *testing.T) {
	t.Parallel()
	f := setup(t)
	keyless := f.approve(t, `{"sku":"N-1"}`, "")
	keyed := f.approve(t, `{"sku":"N-2"}`, "")
	proposal := f.do(t, "POST", "/v1/operations", f.agent, []byte(fmt.Sprintf(
		`{"action":%q,"key":"po-null-proposal","params":{"sku":"N-3"},"request_approval":true}`, action)))
	if proposal.status != http.StatusAccepted {
		t.Fatalf("propose: %d %s", proposal.status, proposal.raw)
	}
	failed := f.queuedOperation(t, "po-null-failed")
	f.move(t, failed, ledger.StatusFailed, time.Time{})
	unknown := f.queuedOperation(t, "po-null-unknown")
	f.move(t, unknown, ledger.StatusUnknown, time.Time{})

	tests := []struct {
		name, method, path, token, body string
		want                            int
	}{
		{"operation with approval", "POST", "/v1/operations", f.agent, fmt.Sprintf(
			`{"action":%q,"key":"po-null-1","params":{"sku":"N-2"},"approval_id":%q,"request_approval":null,"reason":null}`, action, keyed), http.StatusCreated},
		{"operation without key", "POST", "/v1/operations", f.agent, fmt.Sprintf(
			`{"action":%q,"key":null,"params":{"sku":"N-1"},"approval_id":%q}`, action, keyless), http.StatusCreated},
		{"proposal", "POST", "/v1/operations", f.agent, fmt.Sprintf(
			`{"action":%q,"key":"po-null-2","params":{"sku":"N-4"},"request_approval":true,"approval_id":null,"reason":null}`, action), http.StatusAccepted},
		{"approval", "POST", "/v1/approvals", f.approver, fmt.Sprintf(
			`{"action":%q,"params":{"sku":"N-5"},"expires_at":null,"ttl_seconds":60,"policy_version":"p1","max_uses":null}`, action), http.StatusCreated},
		{"approval by expires_at", "POST", "/v1/approvals", f.approver, fmt.Sprintf(
			`{"action":%q,"params":{"sku":"N-6"},"expires_at":%q,"ttl_seconds":null,"policy_version":"p1"}`, action, time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), http.StatusCreated},
		{"approve", "POST", "/v1/operations/" + proposal.str("id") + "/approve", f.approver, fmt.Sprintf(
			`{"params_fingerprint":%q,"policy_version":null,"ttl_seconds":null,"note":null}`, proposal.str("params_fingerprint")), http.StatusOK},
		{"retry", "POST", "/v1/operations/" + failed + "/retry", f.operator, `{"note":null}`, http.StatusOK},
		{"resolve", "POST", "/v1/operations/" + unknown + "/resolve", f.operator,
			`{"outcome":"failed","provider_reference":null,"note":null,"compensation":null}`, http.StatusOK},
		{"pause", "POST", "/v1/dispatch/pause", f.operator, `{"provider":null,"action":null}`, http.StatusOK},
		{"resume", "POST", "/v1/dispatch/resume", f.operator, `{"provider":null,"action":null}`, http.StatusOK},
		{"replay", "POST", "/v1/review/replay", f.operator, `{"since":null,"reason":null,"dry_run":null}`, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := f.do(t, tt.method, tt.path, tt.token, []byte(tt.body)); r.status != tt.want {
				t.Errorf("%s %s with nulls = %d %s, want %d", tt.method, tt.path, r.status, r.raw, tt.want)
			}
		})
	}
}

// TestNullBodyIsRefusedAsNotAnObject: a body of JSON null is not the
// object a route takes, on a route whose fields are all optional too: it
// answers 400 malformed_json like an array, and changes nothing.
func TestNullBodyIsRefusedAsNotAnObject(t *testing.T) {
	t.Parallel()
	f := setup(t)
	failed := f.queuedOperation(t, "po-null-body")
	f.move(t, failed, ledger.StatusFailed, time.Time{})
	tests := []struct{ name, path, token string }{
		{"operation", "/v1/operations", f.agent},
		{"retry", "/v1/operations/" + failed + "/retry", f.operator},
		{"pause", "/v1/dispatch/pause", f.operator},
		{"replay", "/v1/review/replay", f.operator},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, body := range []string{`null`, ` null `, `[]`} {
				if r := f.do(t, "POST", tt.path, tt.token, []byte(body)); r.status != http.StatusBadRequest || r.errorCode() != "malformed_json" {
					t.Errorf("POST %s %s = %d %s, want 400 malformed_json", tt.path, body, r.status, r.raw)
				}
			}
		})
	}
	if got := f.getOperation(t, failed); got["status"] != string(ledger.StatusFailed) {
		t.Errorf("operation is %v after null bodies, want failed", got["status"])
	}
	if r := f.do(t, "GET", "/v1/dispatch", f.operator, nil); len(pausedScopes(r)) != 0 {
		t.Errorf("paused %v after null bodies, want nothing paused", pausedScopes(r))
	}
}
