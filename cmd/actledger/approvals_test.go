package main

import (
	"io"
	"regexp"
	"strings"
	"testing"
)

// approvals runs `actledger approvals args...` against the instance with
// token.
func (in *instance) approvals(t *testing.T, token string, args ...string) string {
	t.Helper()
	return in.command(t, "approvals", token, args...)
}

func TestApproverDecidesProposalsFromTheCLI(t *testing.T) {
	t.Parallel()
	in := startServe(t)
	approver, agent := in.token(t, "approver"), in.token(t, "agent")

	// Over the demo's policy (qty <= 10): a person decides.
	big := post(t, in.base+"/v1/operations", agent, `{"action":"supplier.create_order","key":"po-big","params":{"sku":"A-1","qty":25},"request_approval":true,"reason":"restock before the sale"}`)
	other := post(t, in.base+"/v1/operations", agent, `{"action":"supplier.create_order","key":"po-other","params":{"sku":"B-2","qty":40},"request_approval":true}`)
	if big["status"] != "awaiting_approval" || other["status"] != "awaiting_approval" {
		t.Fatalf("proposals are %v and %v, want awaiting_approval", big["status"], other["status"])
	}
	bigID, otherID := big["id"].(string), other["id"].(string)

	list := in.approvals(t, approver, "list")
	for _, want := range []string{bigID, otherID, "restock before the sale", `{"qty":25,"sku":"A-1"}`, big["params_fingerprint"].(string), "account acct_demo"} {
		if !strings.Contains(list, want) {
			t.Errorf("approvals list lacks %q:\n%s", want, list)
		}
	}
	if strings.Index(list, bigID) > strings.Index(list, otherID) {
		t.Errorf("approvals list is not oldest first:\n%s", list)
	}

	if out := in.approvals(t, approver, "approve", bigID, "--fingerprint", big["params_fingerprint"].(string), "--note", "sale"); !regexp.MustCompile(bigID + ` is queued under approval [0-9a-f-]{36}`).MatchString(out) {
		t.Errorf("approvals approve:\n%s", out)
	}
	done := in.waitStatus(t, agent, bigID, "succeeded")
	if got := in.supplier.Orders(done["external_key"].(string)); got != 1 {
		t.Errorf("orders = %d, want 1", got)
	}

	if out := in.approvals(t, approver, "deny", otherID, "--reason", "too many"); !strings.Contains(out, otherID+" is cancelled") || !strings.Contains(out, "too many") {
		t.Errorf("approvals deny:\n%s", out)
	}
	if got := in.supplier.Orders(other["external_key"].(string)); got != 0 {
		t.Errorf("denied proposal made %d orders", got)
	}
	if out := in.approvals(t, approver, "list"); !strings.Contains(out, "no approval requests") {
		t.Errorf("approvals list after deciding:\n%s", out)
	}

	// Under the policy: approved at once by policy:2026-11.
	small := post(t, in.base+"/v1/operations", agent, `{"action":"supplier.create_order","key":"po-small","params":{"sku":"C-3","qty":2},"request_approval":true}`)
	if small["status"] != "queued" {
		t.Errorf("small proposal is %v, want queued by policy", small["status"])
	}
}

func TestServeRefusesAnActionContractThatDoesNotCompile(t *testing.T) {
	t.Parallel()
	for name, edit := range map[string]func(string) string{
		"params_schema":         func(y string) string { return strings.Replace(y, "type: object", "type: objekt", 1) },
		"approval.auto_approve": func(y string) string { return strings.Replace(y, "params.qty <= 10", "params.qty + 10", 1) },
	} {
		in := prepareServe(t, edit)
		err := run(t.Context(), []string{"serve"}, in.getenv, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), `action "supplier.create_order": `+name) {
			t.Errorf("%s: serve = %v, want an error naming the action and %s", name, err, name)
		}
	}
}
