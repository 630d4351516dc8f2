package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/webhook"
)

// errorMessage is the message of an error answer.
func (r response) errorMessage() string {
	e, _ := r.body["error"].(map[string]any)
	msg, _ := e["message"].(string)
	return msg
}

// TestIntegersBeyondTwoToThe53AreRefusedNamingTheirPath: the canonical form
// holds numbers as IEEE 754 doubles, so an integer beyond ±2^53 would be
// silently rounded (12345678901234567891 stored as 12345678901234567000,
// 2^53+1 fingerprinted as 2^53). Every route that accepts params refuses
// one, naming its JSON path and saying to send it as a string; floats keep
// RFC 8785 semantics and 2^53 itself is exact.
func TestIntegersBeyondTwoToThe53AreRefusedNamingTheirPath(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approval := f.approve(t, `{"sku":"A-1"}`, "")
	approvalBody := func(params string) string {
		return fmt.Sprintf(`{"action":%q,"params":%s,"ttl_seconds":60,"policy_version":"p1"}`, action, params)
	}
	operationBody := func(params string) string {
		return fmt.Sprintf(`{"action":%q,"key":"po-big","params":%s,"approval_id":%q}`, action, params, approval)
	}
	queued := f.queuedOperation(t, "po-resolve")
	resolveBody := func(params string) string {
		return fmt.Sprintf(`{"outcome":"cancelled","compensation":{"action":%q,"key":"undo","params":%s,"approval_id":%q}}`,
			cancelAction, params, approval)
	}
	refused := []struct {
		name, path, token, body, field string
	}{
		{"approval: top level", "/v1/approvals", f.approver, approvalBody(`{"big":12345678901234567891}`), "params.big"},
		{"approval: 2^53+1", "/v1/approvals", f.approver, approvalBody(`{"n":9007199254740993}`), "params.n"},
		{"approval: -(2^53+1)", "/v1/approvals", f.approver, approvalBody(`{"n":-9007199254740993}`), "params.n"},
		{"approval: nested in an array", "/v1/approvals", f.approver, approvalBody(`{"lines":[{"q":1},{"q":100000000000000000000}]}`), "params.lines[1].q"},
		{"approval: odd member name", "/v1/approvals", f.approver, approvalBody(`{"a b":{"c":99999999999999999}}`), `params["a b"].c`},
		{"operation", "/v1/operations", f.agent, operationBody(`{"x":[1,2,{"y":{"z":18446744073709551616}}]}`), "params.x[2].y.z"},
		{"compensation of a resolve", "/v1/operations/" + queued + "/resolve", f.operator, resolveBody(`{"id":9007199254740993}`), "compensation.params.id"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, "POST", tt.path, tt.token, []byte(tt.body))
			if r.status != 400 || r.errorCode() != "invalid_field" || !strings.HasPrefix(r.errorMessage(), tt.field+": ") ||
				!strings.Contains(r.errorMessage(), "as a string") {
				t.Errorf("got %d %s, want 400 invalid_field naming %s with the hint to send a string", r.status, r.raw, tt.field)
			}
		})
	}
	if n := f.count(t, "approvals"); n != 2 {
		t.Errorf("approvals: %d, want 2 (nothing refused was stored)", n)
	}
	if op := f.getOperation(t, queued); op["status"] != "queued" {
		t.Errorf("resolve with a refused compensation changed the operation: %v", op["status"])
	}

	// Exact values pass and keep distinct fingerprints; floats keep RFC
	// 8785 semantics.
	fingerprints := map[string]string{}
	for _, params := range []string{
		`{"n":9007199254740992}`, `{"n":9007199254740991}`, `{"n":-9007199254740992}`,
		`{"f":1.5}`, `{"f":1e300}`, `{"f":1e21}`, `{"s":"12345678901234567891"}`,
	} {
		r := f.do(t, "POST", "/v1/approvals", f.approver, []byte(approvalBody(params)))
		if r.status != 201 {
			t.Errorf("%s: got %d %s, want 201", params, r.status, r.raw)
			continue
		}
		fp := r.str("params_fingerprint")
		if other, ok := fingerprints[fp]; ok {
			t.Errorf("%s and %s share fingerprint %s", params, other, fp)
		}
		fingerprints[fp] = params
	}
}

// queuedOperation enqueues an operation under a fresh approval and returns
// its id: an operation an operator may resolve.
func (f *fixture) queuedOperation(t *testing.T, key string) string {
	t.Helper()
	params := fmt.Sprintf(`{"sku":%q}`, key)
	approval := f.approve(t, params, "")
	r := f.do(t, "POST", "/v1/operations", f.agent, opBody(key, params, approval))
	if r.status != 201 {
		t.Fatalf("enqueue %s: %d %s", key, r.status, r.raw)
	}
	return r.str("id")
}

func (f *fixture) getOperation(t *testing.T, id string) map[string]any {
	t.Helper()
	r := f.do(t, "GET", "/v1/operations/"+id, f.agent, nil)
	if r.status != 200 {
		t.Fatalf("get %s: %d %s", id, r.status, r.raw)
	}
	return r.body
}

// TestNULAndOverlongTextAreRefusedNamingTheField: Postgres cannot store
// U+0000 in text or jsonb, and nothing bounds a note or a reference
// otherwise; every free-text field of every route answers 400 naming the
// field (never a 500), and nothing changes.
func TestNULAndOverlongTextAreRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	f := setup(t, withWebhooks(webhookSecret))
	queued := f.queuedOperation(t, "po-text")
	approval := f.approve(t, `{"order":"ord_1"}`, "")
	long := func(n int) string { return strings.Repeat("x", n+1) }
	nul := `a\u0000b`
	resolve := "/v1/operations/" + queued + "/resolve"
	comp := func(key, params string) string {
		return fmt.Sprintf(`{"outcome":"cancelled","compensation":{"action":%q,"key":"%s","params":%s,"approval_id":%q}}`,
			cancelAction, key, params, approval)
	}
	type request struct{ path, token, body string }
	tests := []struct {
		name, field string
		req         request
	}{
		{"resolve note NUL", "note", request{resolve, f.operator, `{"outcome":"cancelled","note":"` + nul + `"}`}},
		{"resolve note long", "note", request{resolve, f.operator, `{"outcome":"cancelled","note":"` + long(4096) + `"}`}},
		{"resolve provider_reference NUL", "provider_reference", request{resolve, f.operator, `{"outcome":"succeeded","provider_reference":"` + nul + `"}`}},
		{"resolve provider_reference long", "provider_reference", request{resolve, f.operator, `{"outcome":"succeeded","provider_reference":"` + long(1024) + `"}`}},
		{"compensation key NUL", "compensation.key", request{resolve, f.operator, comp(nul, `{"order":"ord_1"}`)}},
		{"compensation key long", "compensation.key", request{resolve, f.operator, comp(long(256), `{"order":"ord_1"}`)}},
		{"compensation params NUL", "compensation.params", request{resolve, f.operator, comp("k", `{"order":"`+nul+`"}`)}},
		{"retry note NUL", "note", request{"/v1/operations/" + queued + "/retry", f.operator, `{"note":"` + nul + `"}`}},
		{"evidence note NUL", "note", request{"/v1/review/evidence/1/resolve", f.operator, `{"note":"` + nul + `"}`}},
		{"replay reason NUL", "reason", request{"/v1/review/replay", f.operator, `{"reason":"` + nul + `"}`}},
		{"approval policy_version long", "policy_version", request{"/v1/approvals", f.approver,
			fmt.Sprintf(`{"action":%q,"params":{},"ttl_seconds":60,"policy_version":%q}`, action, long(256))}},
		{"operation key long", "key", request{"/v1/operations", f.agent, string(opBody(long(256), `{"sku":"po-text"}`, approval))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, "POST", tt.req.path, tt.req.token, []byte(tt.req.body))
			if r.status != 400 || !strings.HasPrefix(r.errorMessage(), tt.field+": ") {
				t.Errorf("got %d %s, want 400 naming %s", r.status, r.raw, tt.field)
			}
		})
	}
	webhookFields := []struct{ name, field, body string }{
		{"webhook reference NUL", "reference", `{"event_id":"e1","type":"t","reference":"` + nul + `","provider_reference":"p","status":"succeeded"}`},
		{"webhook reference long", "reference", `{"event_id":"e2","type":"t","reference":"` + long(1024) + `","provider_reference":"p","status":"succeeded"}`},
		{"webhook provider_reference NUL", "provider_reference", `{"event_id":"e3","type":"t","reference":"r","provider_reference":"` + nul + `","status":"succeeded"}`},
		{"webhook type long", "type", `{"event_id":"e4","type":"` + long(256) + `","reference":"r","provider_reference":"p","status":"succeeded"}`},
	}
	for _, tt := range webhookFields {
		t.Run(tt.name, func(t *testing.T) {
			sig := webhook.Sign(webhookSecret, f.clock.Now().Truncate(time.Second), []byte(tt.body))
			r := f.postWebhook(t, "acme", sig, []byte(tt.body))
			if r.status != 400 || !strings.HasPrefix(r.errorMessage(), tt.field+": ") {
				t.Errorf("got %d %s, want 400 naming %s", r.status, r.raw, tt.field)
			}
		})
	}
	if op := f.getOperation(t, queued); op["status"] != "queued" {
		t.Errorf("operation is %v after refused requests, want queued", op["status"])
	}
	if n := f.count(t, "webhook_events"); n != 0 {
		t.Errorf("webhook_events: %d, want 0", n)
	}
}

// TestTokenNamesWithNULOrOverlongAreRefused: a token name is shown in
// events and logs; U+0000 cannot be stored at all.
func TestTokenNamesWithNULOrOverlongAreRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, name := range []string{"bad\x00name", strings.Repeat("n", 129)} {
		if _, err := f.tokens.Create(context.Background(), "acme-corp", "agent", name); err == nil || !strings.Contains(err.Error(), "token name") {
			t.Errorf("Create(%q): err %v, want a token name error", name[:min(len(name), 10)], err)
		}
	}
}

// TestTTLSecondsOutOfRangeIsRefused: ttl_seconds must be 1 s to one year;
// a value whose nanoseconds overflow int64 (and would wrap to a short,
// valid-looking expiry) is refused before any arithmetic.
func TestTTLSecondsOutOfRangeIsRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := func(ttl string) []byte {
		return []byte(fmt.Sprintf(`{"action":%q,"params":{},"ttl_seconds":%s,"policy_version":"p1"}`, action, ttl))
	}
	for _, ttl := range []string{"0", "-1", "31536001", "18446744074", "9223372036854775807"} {
		r := f.do(t, "POST", "/v1/approvals", f.approver, body(ttl))
		if r.status != 400 || !strings.HasPrefix(r.errorMessage(), "ttl_seconds: ") {
			t.Errorf("ttl_seconds %s: got %d %s, want 400 naming ttl_seconds", ttl, r.status, r.raw)
		}
	}
	far := f.clock.Now().Add(366 * 24 * time.Hour).UTC().Format(time.RFC3339)
	r := f.do(t, "POST", "/v1/approvals", f.approver, []byte(fmt.Sprintf(`{"action":%q,"params":{},"expires_at":%q,"policy_version":"p1"}`, action, far)))
	if r.status != 400 || !strings.HasPrefix(r.errorMessage(), "expires_at: ") {
		t.Errorf("expires_at beyond a year: got %d %s, want 400", r.status, r.raw)
	}
	r = f.do(t, "POST", "/v1/approvals", f.approver, body("31536000"))
	if r.status != 201 {
		t.Fatalf("ttl_seconds of one year: got %d %s, want 201", r.status, r.raw)
	}
	var a struct {
		ExpiresAt time.Time `json:"expires_at"`
	}
	_ = json.Unmarshal([]byte(r.raw), &a)
	if d := a.ExpiresAt.Sub(f.clock.Now()); d < 364*24*time.Hour {
		t.Errorf("one-year approval expires in %s", d)
	}
	if n := f.count(t, "approvals"); n != 1 {
		t.Errorf("approvals: %d, want 1", n)
	}
}

// TestTextLimitsCountCharactersAsTheDocumentDoes: the OpenAPI document's
// maxLength counts characters (JSON Schema), so a key, reason or note at
// its limit in characters outside ASCII is accepted, and one character
// more is refused naming the field.
func TestTextLimitsCountCharactersAsTheDocumentDoes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// "é" is two bytes in UTF-8 and "€" three: at the limit in characters,
	// twice or three times over it in bytes.
	key := strings.Repeat("é", 256)
	reason := strings.Repeat("€", 256)
	note := strings.Repeat("é", 4096)
	tests := []struct {
		name, path, token, body, field string
		want                           int
	}{
		{"key at the limit", "/v1/operations", f.agent,
			fmt.Sprintf(`{"action":%q,"key":%q,"params":{},"request_approval":true}`, action, key), "", http.StatusAccepted},
		{"key over the limit", "/v1/operations", f.agent,
			fmt.Sprintf(`{"action":%q,"key":%q,"params":{},"request_approval":true}`, action, key+"é"), "key", http.StatusBadRequest},
		{"reason at the limit", "/v1/operations", f.agent,
			fmt.Sprintf(`{"action":%q,"key":"po-reason","params":{},"request_approval":true,"reason":%q}`, action, reason), "", http.StatusAccepted},
		{"reason over the limit", "/v1/operations", f.agent,
			fmt.Sprintf(`{"action":%q,"key":"po-reason-long","params":{},"request_approval":true,"reason":%q}`, action, reason+"€"), "reason", http.StatusBadRequest},
		{"policy_version at the limit", "/v1/approvals", f.approver,
			fmt.Sprintf(`{"action":%q,"params":{},"ttl_seconds":60,"policy_version":%q}`, action, reason), "", http.StatusCreated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, "POST", tt.path, tt.token, []byte(tt.body))
			if r.status != tt.want || (tt.field != "" && !strings.HasPrefix(r.errorMessage(), tt.field+":")) {
				t.Errorf("%s = %d %s, want %d naming %q", tt.name, r.status, r.raw, tt.want, tt.field)
			}
		})
	}
	// A note at its limit, on a decision.
	p := f.do(t, "POST", "/v1/operations", f.agent, []byte(fmt.Sprintf(`{"action":%q,"key":"po-note","params":{},"request_approval":true}`, action)))
	body := fmt.Sprintf(`{"params_fingerprint":%q,"note":%q}`, p.str("params_fingerprint"), note)
	if r := f.do(t, "POST", "/v1/operations/"+p.str("id")+"/approve", f.approver, []byte(body)); r.status != http.StatusOK {
		t.Errorf("approve with a note of 4096 characters = %d %s, want 200", r.status, r.raw)
	}
}

// TestKeysWithControlOrInvisibleCharactersAreRefusedNamingTheField: a key
// is compared by eye (console, CLI, another agent's tool text), so one
// holding a control character (which forges or hides lines where it is
// printed) or an invisible one (which makes two keys look alike) is
// refused with 400 naming the field, for operations, proposals and
// compensations; nothing is stored. Free text keeps them: a reason with a
// line break is a proposal like any other, shown escaped.
func TestKeysWithControlOrInvisibleCharactersAreRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approval := f.approve(t, `{"sku":"A-1"}`, "")
	queued := f.queuedOperation(t, "po-keys")
	before := f.count(t, "operations")
	for _, key := range []string{"po-1\x1b[8m", "po-1\nparams: {}", "po-1\r", "po-\u202e1", "po-1\u3164", "po-1\u200b", "po-1\u00a0", "po-1\ufe0f"} {
		quoted, _ := json.Marshal(key) // JSON, not Go, escapes
		r := f.do(t, "POST", "/v1/operations", f.agent, []byte(fmt.Sprintf(`{"action":%q,"key":%s,"params":{"sku":"A-1"},"approval_id":%q}`, action, quoted, approval)))
		if r.status != 400 || r.errorCode() != "invalid_field" || !strings.HasPrefix(r.errorMessage(), "key: must be visible text") {
			t.Errorf("key %+q: got %d %s, want 400 invalid_field naming key", key, r.status, r.raw)
		}
		comp := fmt.Sprintf(`{"outcome":"cancelled","note":"n","compensation":{"action":%q,"key":%s,"params":{},"approval_id":%q}}`, cancelAction, quoted, approval)
		if r := f.do(t, "POST", "/v1/operations/"+queued+"/resolve", f.operator, []byte(comp)); r.status != 400 ||
			!strings.HasPrefix(r.errorMessage(), "compensation.key: must be visible text") {
			t.Errorf("compensation key %+q: got %d %s, want 400 naming compensation.key", key, r.status, r.raw)
		}
	}
	if n := f.count(t, "operations"); n != before {
		t.Errorf("operations: %d, want %d (nothing refused was stored)", n, before)
	}
	if op := f.getOperation(t, queued); op["status"] != "queued" {
		t.Errorf("a refused compensation changed the operation: %v", op["status"])
	}
	for _, key := range []string{"po-37", "po 37", "Müller-東京-☕", `a\u202e`} {
		if r := f.do(t, "POST", "/v1/operations", f.agent, opBody(key, `{"sku":"A-1"}`, approval)); r.status == 400 {
			t.Errorf("visible key %+q: got %d %s, want it accepted (the approval's one use may be spent: 403)", key, r.status, r.raw)
		}
	}
}
