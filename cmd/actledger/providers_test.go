package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const checkedFile = `providers:
  helpdesk:
    base_url: https://acme.zendesk.example
    account: acme-support
    environment: production
    auth: {bearer_env: HELPDESK_TOKEN}
    headers: {Zendesk-Api-Version: "2"}
    create:
      path: /api/v2/tickets.json
      body: '{"ticket": {"subject": params.subject, "external_id": reference}}'
      reference: response.ticket.id
    lookup:
      path: "/api/v2/tickets.json?external_id={reference}"
      matches: response.tickets
      reference: match.id
      complete: '!response.incomplete_results'
      visibility_lag: 5s
    outcomes:
      - {when: 'status == 422 && response.error == "RecordInvalid"', outcome: rejected, reason: the ticket is invalid}
actions:
  support.open_ticket:
    provider: helpdesk
    key: '"case-" + params.case_id'
    params_schema: {type: object, required: [subject], properties: {subject: {type: string}}}
`

const checkedToken = "zd_SECRET_token_value"

func checkProviders(t *testing.T, env map[string]string, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(path, []byte(checkedFile), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	getenv := func(k string) string { return env[k] }
	status = exitStatus(run(t.Context(), append([]string{"providers", "check", path}, args...), getenv, &out, &errOut), &errOut)
	return status, out.String(), errOut.String()
}

func TestProvidersCheckSaysWhatHappensAfterALostResponse(t *testing.T) {
	t.Parallel()
	status, out, stderr := checkProviders(t, map[string]string{"HELPDESK_TOKEN": checkedToken})
	if status != 0 {
		t.Fatalf("status %d, stderr %s", status, stderr)
	}
	for _, want := range []string{
		"valid: 1 provider, 1 action",
		"support.open_ticket: provider helpdesk, POST https://acme.zendesk.example/api/v2/tickets.json",
		"credentials: Authorization: Bearer from HELPDESK_TOKEN",
		"never resends blindly (the supplier takes no idempotency key): looks the effect up",
		"two or more go to a person (duplicate_effect)",
		"an answer for which lookup.complete (!response.incomplete_results) is false is inconclusive: never taken for absent",
		"outcomes[0]: when",
		`one operation per business key "case-" + params.case_id, whatever key the caller sends`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+stderr, checkedToken) {
		t.Error("the output holds the credential's value")
	}
}

// TestProvidersCheckListsTheNotificationReceivers: the check names each
// receiver with its events, tenant, address and the variable of its
// secret, never the secret.
func TestProvidersCheckListsTheNotificationReceivers(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	path := filepath.Join(t.TempDir(), "providers.yaml")
	file := checkedFile + `notifications:
  approvals-relay:
    url: https://hooks.acme.example/actledger
    secret_env: NOTIFY_SECRET
    tenant: acme-corp
    events: [approval.requested, operation.settled]
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	env := map[string]string{"HELPDESK_TOKEN": checkedToken, "NOTIFY_SECRET": secret}
	status := exitStatus(run(t.Context(), []string{"providers", "check", path}, func(k string) string { return env[k] }, &out, &errOut), &errOut)
	if status != 0 {
		t.Fatalf("status %d, stderr %s", status, errOut.String())
	}
	for _, want := range []string{
		"valid: 1 provider, 1 action, 1 notification receiver.",
		`notifications approvals-relay: approval.requested, operation.settled of tenant "acme-corp", POST https://hooks.acme.example/actledger, signed as Standard Webhooks (secret from NOTIFY_SECRET)`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String()+errOut.String(), secret) {
		t.Error("the output holds the secret")
	}
}

func TestProvidersCheckSaysWhatAReconcileRunCompares(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "providers.yaml")
	file := `providers:
  orders:
    base_url: https://orders.example
    tenant: acme-corp
    create: {path: /v1/orders}
    reconcile:
      list:
        path: "/v1/orders?from={since}&to={until}"
        records: response.orders
        next: 'has(response.next) ? {"cursor": response.next} : {}'
        reference: record.reference
        provider_reference: record.id
        created: record.created_at
      match: record.quantity == params.quantity
      every: 30m
actions:
  supply.order: {provider: orders}
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	status := exitStatus(run(t.Context(), []string{"providers", "check", path}, func(string) string { return "" }, &out, &errOut), &errOut)
	if status != 0 {
		t.Fatalf("status %d, stderr %s", status, errOut.String())
	}
	want := "  reconcile: every 30m, reads the supplier's records created in the 24h up to 15m ago (GET /v1/orders?from={since}&to={until}, at most 100 pages)"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}

func TestProvidersCheckRenderShowsTheRequestWithTheCredentialMasked(t *testing.T) {
	t.Parallel()
	status, out, stderr := checkProviders(t, map[string]string{"HELPDESK_TOKEN": checkedToken},
		"--render", "support.open_ticket", "--params", `{"subject":"Printer on fire"}`, "--key", "al_k1")
	if status != 0 {
		t.Fatalf("status %d, stderr %s", status, stderr)
	}
	for _, want := range []string{
		"POST https://acme.zendesk.example/api/v2/tickets.json\n",
		"Authorization: ***\n",
		"Zendesk-Api-Version: 2\n",
		`{"ticket":{"external_id":"al_k1","subject":"Printer on fire"}}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+stderr, checkedToken) {
		t.Error("the output holds the credential's value")
	}
}

func TestProvidersCheckRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"credential unset", nil, nil, `provider "helpdesk": auth.bearer_env: environment variable HELPDESK_TOKEN is not set or is empty`},
		{"render of an unknown action", map[string]string{"HELPDESK_TOKEN": checkedToken}, []string{"--render", "nope"}, `no action "nope"`},
		{"render of params the schema refuses", map[string]string{"HELPDESK_TOKEN": checkedToken}, []string{"--render", "support.open_ticket", "--params", `{}`}, "params_schema refuses them"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, _, stderr := checkProviders(t, tt.env, tt.args...)
			if status != 1 || !strings.Contains(stderr, tt.want) {
				t.Errorf("status %d, stderr %q; want 1 and %q", status, stderr, tt.want)
			}
		})
	}
}
