package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests in this file drive the providers-file keys of contract v3:
// credentials, body shapes and encodings, answers read by expressions, the
// supplier's own error meanings, lookups that return lists, and webhooks.

// testEnv is an environment for credentials and secrets.
func testEnv(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

const testToken = "tok_SECRET_abc123"

// parseV3 parses a one-provider file whose provider block is body
// (indented four spaces) with base_url baseURL.
func parseV3(t *testing.T, baseURL, body string) (*Registry, error) {
	t.Helper()
	doc := "providers:\n  helpdesk:\n    base_url: " + baseURL + "\n" + body + "actions:\n  support.open_ticket: {provider: helpdesk}\n"
	return ParseEnv([]byte(doc), testEnv(map[string]string{
		"HELPDESK_TOKEN": testToken, "HELPDESK_USER": "agent@example.com", "HELPDESK_PASSWORD": "pw_SECRET",
		"HELPDESK_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "EMPTY": "  ",
	}))
}

func mustV3(t *testing.T, baseURL, body string) *Config {
	t.Helper()
	reg, err := parseV3(t, baseURL, body)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	cfg, _ := reg.Provider("helpdesk")
	return cfg
}

// recorder is a supplier that keeps every request and answers with h.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	method, uri string
	header      http.Header
	body        string
}

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

func newRecorder(t *testing.T, h http.HandlerFunc) (*recorder, *httptest.Server) {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, recorded{r.Method, r.URL.RequestURI(), r.Header.Clone(), string(raw)})
		rec.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return rec, srv
}

func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

const zendeskLike = `    account: acme-support
    environment: production
    auth: {bearer_env: HELPDESK_TOKEN}
    headers: {Zendesk-Api-Version: "2"}
    create:
      path: /api/v2/{params.brand}/tickets.json
      body: >-
        {"ticket": {"subject": params.subject, "comment": {"body": params.body},
                    "external_id": reference, "tags": [account, environment]}}
      reference: response.ticket.id
    idempotency: {header: Idempotency-Key, retention: 2h}
    lookup:
      path: "/api/v2/tickets.json?external_id={reference}"
      matches: response.tickets
      reference: match.id
      visibility_lag: 5s
`

func TestCreateSendsTheSuppliersBodyShapeCredentialAndHeaders(t *testing.T) {
	t.Parallel()
	rec, srv := newRecorder(t, answer(201, `{"ticket":{"id":35436,"external_id":"op 1/a"}}`))
	p := NewHTTP(mustV3(t, srv.URL, zendeskLike), HTTPOptions{})
	res := p.Create(t.Context(), CreateRequest{ExternalKey: "op 1/a", Params: json.RawMessage(`{"brand":"eu/west","subject":"Printer","body":"on fire","qty":12345678901234567}`)})
	if res.Class != ClassSucceeded || res.ProviderReference != "35436" || res.Review != "" {
		t.Fatalf("result = %+v, want succeeded with reference 35436", res)
	}
	got := rec.all()
	if len(got) != 1 {
		t.Fatalf("supplier saw %d requests, want 1", len(got))
	}
	r := got[0]
	if r.method != "POST" || r.uri != "/api/v2/eu%2Fwest/tickets.json" {
		t.Errorf("request = %s %s, want POST to the path with the param path-escaped", r.method, r.uri)
	}
	for name, want := range map[string]string{
		"Authorization": "Bearer " + testToken, "Zendesk-Api-Version": "2", "Idempotency-Key": "op 1/a",
		"Content-Type": "application/json", "Accept": "application/json",
	} {
		if r.header.Get(name) != want {
			t.Errorf("header %s = %q, want %q", name, r.header.Get(name), want)
		}
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"ticket": map[string]any{"subject": "Printer", "comment": map[string]any{"body": "on fire"},
		"external_id": "op 1/a", "tags": []any{"acme-support", "production"}}}
	if fmt.Sprint(body) != fmt.Sprint(want) {
		t.Errorf("body = %s, want %v", r.body, want)
	}
	if strings.Contains(fmt.Sprint(res), testToken) {
		t.Errorf("the result holds the credential: %+v", res)
	}
}

func TestFormEncodingWritesNestedKeysAsStripeDoes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		{"flat", map[string]any{"amount": int64(2000), "currency": "usd"}, "amount=2000&currency=usd"},
		{"nested map", map[string]any{"metadata": map[string]any{"reference": "op_1", "b": "x y"}}, "metadata%5Bb%5D=x+y&metadata%5Breference%5D=op_1"},
		{"list of maps", map[string]any{"items": []any{map[string]any{"price": "p_1", "quantity": int64(2)}}}, "items%5B0%5D%5Bprice%5D=p_1&items%5B0%5D%5Bquantity%5D=2"},
		{"bools and null", map[string]any{"confirm": true, "off": false, "gone": nil}, "confirm=true&off=false"},
		{"float", map[string]any{"rate": 1.5}, "rate=1.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := formEncode(tt.body)
			if got != tt.want {
				t.Errorf("formEncode = %q, want %q", got, tt.want)
			}
			if _, err := url.ParseQuery(got); err != nil {
				t.Errorf("not a valid form: %v", err)
			}
		})
	}
}

func TestFormCreateCarriesTheKeyInMetadataAndBasicAuth(t *testing.T) {
	t.Parallel()
	rec, srv := newRecorder(t, answer(200, `{"id":"pi_1","object":"payment_intent"}`))
	cfg := mustV3(t, srv.URL, `    auth: {basic: {username_env: HELPDESK_USER, password_env: HELPDESK_PASSWORD}}
    create:
      path: /v1/payment_intents
      encoding: form
      body: '{"amount": params.amount, "currency": "usd", "metadata": {"reference": reference}}'
      reference: response.id
`)
	res := NewHTTP(cfg, HTTPOptions{}).Create(t.Context(), CreateRequest{ExternalKey: "op_7", Params: json.RawMessage(`{"amount":2000}`)})
	if res.Class != ClassSucceeded || res.ProviderReference != "pi_1" {
		t.Fatalf("result = %+v", res)
	}
	r := rec.all()[0]
	form, err := url.ParseQuery(r.body)
	if err != nil || form.Get("metadata[reference]") != "op_7" || form.Get("amount") != "2000" {
		t.Errorf("form = %q (%v), want metadata[reference]=op_7 and amount=2000", r.body, err)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
		t.Errorf("Content-Type = %q", ct)
	}
	if user, pw, ok := (&http.Request{Header: r.header}).BasicAuth(); !ok || user != "agent@example.com" || pw != "pw_SECRET" {
		t.Errorf("basic auth = %q %q %v", user, pw, ok)
	}
}

func TestOutcomesRulesGiveTheSuppliersMeaningBeforeTheDefaultTable(t *testing.T) {
	t.Parallel()
	const rules = `    create: {path: /v1/charges}
    idempotency: {header: Idempotency-Key, retention: 24h}
    outcomes:
      - when: status == 409 && response.error.code == "idempotency_key_in_use"
        outcome: unknown
        reason: the key is still in flight at the supplier
      - when: status == 400 && response.error.type == "idempotency_error"
        outcome: review
        reason: the supplier holds this key with other params
      - when: status == 402
        outcome: rejected
        reason: card declined, nothing charged
      - when: status == 403 && headers["x-ratelimit-remaining"] == "0"
        outcome: not_executed
        reason: rate limited
      - when: status == 200 && response.status == "requires_action"
        outcome: succeeded
        reason: created, waiting for the customer
`
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		class      Class
		review     string
		reason     string
		retryAfter time.Duration
	}{
		{"in flight", 409, nil, `{"error":{"code":"idempotency_key_in_use"}}`, ClassUnknown, "", "the key is still in flight at the supplier", 0},
		{"key holds other params", 400, nil, `{"error":{"type":"idempotency_error"}}`, ClassUnknown, ReviewProviderOutcome, "the supplier holds this key with other params", 0},
		{"other 400 falls to the default table", 400, nil, `{"error":{"type":"invalid_request_error"}}`, ClassRejected, "", "", 0},
		{"400 that is not JSON falls to the default table", 400, nil, `<html>`, ClassRejected, "", "", 0},
		{"declined", 402, nil, `{"error":{"type":"card_error"}}`, ClassRejected, "", "card declined, nothing charged", 0},
		{"rate limit by header, Retry-After honoured", 403, map[string]string{"X-RateLimit-Remaining": "0", "Retry-After": "7"}, `{}`, ClassNotExecuted, "", "rate limited", 7 * time.Second},
		{"403 with quota left falls to the default table", 403, map[string]string{"X-RateLimit-Remaining": "12"}, `{}`, ClassRejected, "", "", 0},
		{"a 2xx a rule names", 200, nil, `{"id":"ch_1","status":"requires_action"}`, ClassSucceeded, "", "created, waiting for the customer", 0},
		{"409 without the code falls to the default table", 409, nil, `{}`, ClassUnknown, "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, srv := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			res := NewHTTP(mustV3(t, srv.URL, rules), HTTPOptions{}).Create(t.Context(), CreateRequest{ExternalKey: "op_1", Params: json.RawMessage(`{}`)})
			if res.Class != tt.class || res.Review != tt.review || res.Reason != tt.reason || res.RetryAfter != tt.retryAfter {
				t.Errorf("result = class %s review %q reason %q retry-after %s; want %s %q %q %s",
					res.Class, res.Review, res.Reason, res.RetryAfter, tt.class, tt.review, tt.reason, tt.retryAfter)
			}
			if tt.reason != "" && !strings.Contains(res.Error, tt.reason) {
				t.Errorf("Error = %q, want the rule's reason in it", res.Error)
			}
		})
	}
}

func TestLookupMatchesCountsTheSuppliersRecords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		body   string
		want   LookupStatus
		ref    string
		refs   []string
		errHas string
	}{
		{"no record is absent", 200, `{"tickets":[],"count":0}`, LookupAbsent, "", nil, ""},
		{"one record is found", 200, `{"tickets":[{"id":35436}],"count":1}`, LookupFound, "35436", nil, ""},
		{"two records are a duplicate effect", 200, `{"tickets":[{"id":1},{"id":2}],"count":2}`, LookupDuplicate, "", []string{"1", "2"}, ""},
		{"404 is absent", 404, `{}`, LookupAbsent, "", nil, ""},
		{"matches that are not a list", 200, `{"tickets":{"id":1}}`, LookupError, "", nil, "not a list"},
		{"a record without a reference", 200, `{"tickets":[{"subject":"x"}]}`, LookupError, "", nil, "lookup.reference"},
		{"an answer without the field", 200, `{"error":"x"}`, LookupError, "", nil, "lookup.matches"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec, srv := newRecorder(t, answer(tt.status, tt.body))
			res := NewHTTP(mustV3(t, srv.URL, zendeskLike), HTTPOptions{}).Lookup(t.Context(), LookupRequest{ExternalKey: "op 1/a"})
			if res.Status != tt.want || res.ProviderReference != tt.ref || !slices.Equal(res.References, tt.refs) || !strings.Contains(res.Error, tt.errHas) {
				t.Errorf("lookup = %+v; want %s %q %q error containing %q", res, tt.want, tt.ref, tt.refs, tt.errHas)
			}
			r := rec.all()[0]
			if r.uri != "/api/v2/tickets.json?external_id=op+1%2Fa" || r.header.Get("Authorization") != "Bearer "+testToken || r.header.Get("Zendesk-Api-Version") != "2" {
				t.Errorf("lookup request = %s %v", r.uri, r.header)
			}
		})
	}
}

// githubLike searches as GitHub's search API answers: an answer with
// incomplete_results true stopped at a timeout
// (https://docs.github.com/rest/search/search, "Timeouts and incomplete
// results").
var githubLike = strings.Replace(zendeskLike, "      matches: response.tickets\n", "      matches: response.tickets\n      complete: '!response.incomplete_results'\n", 1)

// An answer for which lookup.complete is false proves neither the effect
// nor its absence, whatever records it holds: it is inconclusive, and
// says why.
func TestLookupCompleteFalseIsInconclusiveNeverAbsentNorFound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		body   string
		want   LookupStatus
		ref    string
		errHas string
	}{
		{"complete and empty is absent", `{"tickets":[],"incomplete_results":false}`, LookupAbsent, "", ""},
		{"complete with one is found", `{"tickets":[{"id":7}],"incomplete_results":false}`, LookupFound, "7", ""},
		{"incomplete and empty is inconclusive", `{"tickets":[],"incomplete_results":true}`, LookupInconclusive, "", "lookup.complete is false"},
		{"incomplete with one is inconclusive", `{"tickets":[{"id":7}],"incomplete_results":true}`, LookupInconclusive, "", "lookup.complete is false"},
		{"an answer complete cannot read is an error", `{"tickets":[]}`, LookupError, "", "lookup.complete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, srv := newRecorder(t, answer(200, tt.body))
			res := NewHTTP(mustV3(t, srv.URL, githubLike), HTTPOptions{}).Lookup(t.Context(), LookupRequest{ExternalKey: "op-1"})
			if res.Status != tt.want || res.ProviderReference != tt.ref || !strings.Contains(res.Error, tt.errHas) {
				t.Errorf("lookup = %+v; want %s %q, error containing %q", res, tt.want, tt.ref, tt.errHas)
			}
		})
	}
}

// lookup.complete is compiled and type-checked when the file loads: one
// that is not a bool stops the load naming the field.
func TestLookupCompleteMustBeABoolAtLoad(t *testing.T) {
	t.Parallel()
	_, err := parseV3(t, "https://helpdesk.example", strings.Replace(githubLike, "'!response.incomplete_results'", "'\"yes\"'", 1))
	if err == nil || !strings.Contains(err.Error(), "lookup.complete") {
		t.Fatalf("parse = %v, want an error naming lookup.complete", err)
	}
}

func TestABodyThatCannotBeBuiltIsNotSentAndGoesToAPerson(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, params string }{
		{"the body reads a missing param", `{"brand":"eu","body":"x"}`},
		{"the path names a missing param", `{"subject":"s","body":"x"}`},
		{"the path param is not a scalar", `{"brand":{"a":1},"subject":"s","body":"x"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec, srv := newRecorder(t, answer(201, `{"ticket":{"id":1}}`))
			res := NewHTTP(mustV3(t, srv.URL, zendeskLike), HTTPOptions{}).Create(t.Context(), CreateRequest{ExternalKey: "op_1", Params: json.RawMessage(tt.params)})
			if res.Sent || res.Class != ClassNotExecuted || res.Review != ReviewProviderConfigError || res.Error == "" {
				t.Errorf("result = %+v; want not sent, provider_config_error, with the expression's error", res)
			}
			if n := len(rec.all()); n != 0 {
				t.Errorf("supplier saw %d requests, want none", n)
			}
		})
	}
}

func TestAnExpressionOverTheCostLimitFailsInsteadOfStallingAWorker(t *testing.T) {
	t.Parallel()
	rec, srv := newRecorder(t, answer(201, `{"id":1}`))
	cfg := mustV3(t, srv.URL, `    create:
      path: /v1/x
      body: '{"n": params.items.map(a, params.items.map(b, params.items.map(c, a + b + c))), "reference": reference}'
`)
	items := make([]int, 200)
	params, _ := json.Marshal(map[string]any{"items": items})
	res := NewHTTP(cfg, HTTPOptions{}).Create(t.Context(), CreateRequest{ExternalKey: "op_1", Params: params})
	if res.Review != ReviewProviderConfigError || !strings.Contains(res.Error, "cost") || len(rec.all()) != 0 {
		t.Errorf("result = %+v; want a cost-limit error, nothing sent", res)
	}
}

func TestCredentialsGoOnlyToTheBaseURLAndRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	elsewhere, other := newRecorder(t, answer(201, `{"ticket":{"id":9}}`))
	_, srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	})
	p := NewHTTP(mustV3(t, srv.URL, zendeskLike), HTTPOptions{})
	res := p.Create(t.Context(), CreateRequest{ExternalKey: "op_1", Params: json.RawMessage(`{"brand":"b","subject":"s","body":"x"}`)})
	if res.Class != ClassUnknown || res.HTTPStatus != http.StatusTemporaryRedirect {
		t.Errorf("create answered by a redirect = %+v; want unknown, the redirect reported", res)
	}
	lr := p.Lookup(t.Context(), LookupRequest{ExternalKey: "op_1"})
	if lr.Status != LookupError {
		t.Errorf("lookup answered by a redirect = %+v; want error", lr)
	}
	if n := len(elsewhere.all()); n != 0 {
		t.Errorf("the redirect target saw %d requests, want none", n)
	}
}

func TestRenderCreateShowsTheRequestWithTheCredentialMasked(t *testing.T) {
	t.Parallel()
	cfg := mustV3(t, "https://acme.zendesk.example", zendeskLike)
	r, err := cfg.RenderCreate(context.Background(), "op_1", json.RawMessage(`{"brand":"b","subject":"s","body":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.URL != "https://acme.zendesk.example/api/v2/b/tickets.json" || r.Header.Get("Authorization") != Masked {
		t.Errorf("render = %s %v", r.URL, r.Header)
	}
	if strings.Contains(fmt.Sprint(r), testToken) || strings.Contains(fmt.Sprintf("%+v", cfg), testToken) {
		t.Error("the rendered request or the printed config holds the credential")
	}
}

func TestBadV3FilesAreRefusedNamingTheProviderAndField(t *testing.T) {
	t.Parallel()
	const local = "http://127.0.0.1:9"
	tests := []struct {
		name, base, body string
		wantField        string
		wantText         string
	}{
		{"body does not compile", local, "    create: {path: /x, body: '{\"a\": '}\n", "create.body", "does not compile"},
		{"body is not a map", local, "    create: {path: /x, body: '\"text\" + reference'}\n", "create.body", "must be a map"},
		{"reference of the wrong type", local, "    create: {path: /x, reference: 'status == 200'}\n", "create.reference", "must be a string or an integer"},
		{"unknown encoding", local, "    create: {path: /x, encoding: xml}\n", "create.encoding", `"xml"`},
		{"matches not a list", local, "    create: {path: /x}\n    lookup: {path: '/x?r={reference}', matches: 'response.count == 1'}\n", "lookup.matches", "must be a list"},
		{"outcome rule with an unknown outcome", local, "    create: {path: /x}\n    outcomes: [{when: 'status == 400', outcome: maybe, reason: r}]\n", "outcomes[0].outcome", `"maybe"`},
		{"outcome rule that is not a bool", local, "    create: {path: /x}\n    outcomes: [{when: 'status', outcome: unknown, reason: r}]\n", "outcomes[0].when", "must be a bool"},
		{"outcome rule without a reason", local, "    create: {path: /x}\n    outcomes: [{when: 'status == 400', outcome: unknown}]\n", "outcomes[0].reason", "required"},
		{"credential variable unset", local, "    auth: {bearer_env: NOT_SET_ANYWHERE}\n    create: {path: /x}\n", "auth.bearer_env", "NOT_SET_ANYWHERE is not set"},
		{"credential variable empty", local, "    auth: {header: {name: X-Token, value_env: EMPTY}}\n    create: {path: /x}\n", "auth.header.value_env", "EMPTY is not set or is empty"},
		{"two kinds of auth", local, "    auth: {bearer_env: HELPDESK_TOKEN, header: {name: X-Token, value_env: HELPDESK_TOKEN}}\n    create: {path: /x}\n", "auth", "exactly one"},
		{"plain http to a remote host", "http://api.example.com", "    auth: {bearer_env: HELPDESK_TOKEN}\n    create: {path: /x}\n", "base_url", "plain http"},
		{"credential in headers", local, "    headers: {Authorization: Bearer x}\n    create: {path: /x}\n", "headers.Authorization", "auth"},
		{"unknown signature scheme", local, "    create: {path: /x}\n    tenant: t\n    webhook: {secret_env: HELPDESK_WEBHOOK_SECRET, signature: svix, event_id: body.id, reference: body.r, outcome: '\"succeeded\"', provider_reference: body.id}\n", "webhook.signature", `"svix"`},
		{"hmac without its block", local, "    create: {path: /x}\n    tenant: t\n    webhook: {secret_env: HELPDESK_WEBHOOK_SECRET, signature: hmac, event_id: body.id, reference: body.r, outcome: '\"succeeded\"', provider_reference: body.id}\n", "webhook.hmac", "required with signature: hmac"},
		{"hmac block with another scheme", local, "    create: {path: /x}\n    tenant: t\n    webhook: {secret_env: HELPDESK_WEBHOOK_SECRET, signature: github, hmac: {header: X-Sig, encoding: hex}, event_id: body.id, reference: body.r, outcome: '\"succeeded\"', provider_reference: body.id}\n", "webhook.hmac", `"github"`},
		{"hmac unknown encoding", local, "    create: {path: /x}\n    tenant: t\n    webhook: {secret_env: HELPDESK_WEBHOOK_SECRET, signature: hmac, hmac: {header: X-Sig, encoding: base32}, event_id: body.id, reference: body.r, outcome: '\"succeeded\"', provider_reference: body.id}\n", "webhook.hmac.encoding", `"base32"`},
		{"hmac without a header", local, "    create: {path: /x}\n    tenant: t\n    webhook: {secret_env: HELPDESK_WEBHOOK_SECRET, signature: hmac, hmac: {encoding: hex}, event_id: body.id, reference: body.r, outcome: '\"succeeded\"', provider_reference: body.id}\n", "webhook.hmac.header", "required"},
		{"hmac timestamp not signed", local, "    create: {path: /x}\n    tenant: t\n    webhook: {secret_env: HELPDESK_WEBHOOK_SECRET, signature: hmac, hmac: {header: X-Sig, encoding: hex, timestamp_header: X-Ts}, event_id: body.id, reference: body.r, outcome: '\"succeeded\"', provider_reference: body.id}\n", "webhook.hmac.signed", "{timestamp}"},
		{"webhook without secret_env", local, "    create: {path: /x}\n    tenant: t\n    webhook: {signature: stripe, event_id: body.id, reference: body.r, outcome: '\"succeeded\"', provider_reference: body.id}\n", "webhook.secret_env", "required"},
		{"webhook secret unset", local, "    create: {path: /x}\n    tenant: t\n    webhook: {secret_env: NOPE, signature: stripe, event_id: body.id, reference: body.r, outcome: '\"succeeded\"', provider_reference: body.id}\n", "webhook.secret_env", "NOPE is not set"},
		{"webhook without tenant", local, "    create: {path: /x}\n    webhook: {secret_env: HELPDESK_WEBHOOK_SECRET, event_id: body.id, reference: body.r, outcome: '\"succeeded\"', provider_reference: body.id}\n", "tenant", "required"},
		{"webhook outcome not a string", local, "    create: {path: /x}\n    tenant: t\n    webhook: {secret_env: HELPDESK_WEBHOOK_SECRET, event_id: body.id, reference: body.r, outcome: '1 == 1', provider_reference: body.id}\n", "webhook.outcome", "must be a string"},
		{"lookup but the key never sent", local, "    create: {path: /x, body: '{\"subject\": params.subject}'}\n    lookup: {path: '/x?r={reference}'}\n", "create.body", "must carry reference"},
		{"malformed path param", local, "    create: {path: '/x/{params.}'}\n", "create.path", "{params.NAME}"},
		{"malformed lookup path param", local, "    create: {path: /x}\n    lookup: {path: '/x/{params./y?r={reference}'}\n", "lookup.path", "{params.NAME}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseV3(t, tt.base, tt.body)
			if err == nil {
				t.Fatal("parse succeeded, want an error")
			}
			msg := err.Error()
			if !strings.Contains(msg, `provider "helpdesk": `+tt.wantField+": ") || !strings.Contains(msg, tt.wantText) {
				t.Errorf("error = %q; want it to name %s and say %q", msg, tt.wantField, tt.wantText)
			}
			for _, secret := range []string{testToken, "pw_SECRET", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"} {
				if strings.Contains(msg, secret) {
					t.Errorf("error %q holds a secret value", msg)
				}
			}
		})
	}
}

func TestV1FileKeepsPlainHTTPToAnyHost(t *testing.T) {
	t.Parallel()
	if _, err := parseV3(t, "http://mocksupplier:9100", "    create: {path: /v1/orders}\n"); err != nil {
		t.Errorf("a v1 provider on plain http was refused: %v", err)
	}
}

func TestReadWebhookUsesTheProvidersExpressions(t *testing.T) {
	t.Parallel()
	cfg := mustV3(t, "http://127.0.0.1:9", `    create: {path: /x}
    tenant: acme
    webhook:
      secret_env: HELPDESK_WEBHOOK_SECRET
      signature: standard
      event_id: headers["webhook-id"]
      reference: body.data.external_id
      outcome: 'body.type == "ticket.created" ? "succeeded" : (body.type == "ticket.deleted" ? "failed" : "ignore")'
      provider_reference: body.data.id
`)
	tests := []struct {
		name, body string
		want       WebhookEvent
		errHas     string
	}{
		{"created", `{"type":"ticket.created","data":{"id":35436,"external_id":"op_1"}}`,
			WebhookEvent{EventID: "msg_1", Reference: "op_1", Outcome: WebhookSucceeded, ProviderReference: "35436", Type: "ticket.created"}, ""},
		{"deleted", `{"type":"ticket.deleted","data":{"id":35436,"external_id":"op_1"}}`,
			WebhookEvent{EventID: "msg_1", Reference: "op_1", Outcome: WebhookFailed, ProviderReference: "35436", Type: "ticket.deleted"}, ""},
		{"ignored, without the fields", `{"type":"ticket.viewed"}`,
			WebhookEvent{EventID: "msg_1", Outcome: WebhookIgnore, Type: "ticket.viewed"}, ""},
		{"created without our reference", `{"type":"ticket.created","data":{"id":1}}`, WebhookEvent{}, "webhook.reference"},
		{"created without its own reference", `{"type":"ticket.created","data":{"external_id":"op_1"}}`, WebhookEvent{}, "webhook.provider_reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := cfg.ReadWebhook(t.Context(), []byte(tt.body), http.Header{"Webhook-Id": {"msg_1"}})
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Errorf("err = %v, want one naming %s", err, tt.errHas)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ReadWebhook = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	if _, err := cfg.ReadWebhook(t.Context(), []byte(`not json`), nil); !errors.Is(err, ErrWebhookNotJSON) {
		t.Errorf("non-JSON body: err = %v, want ErrWebhookNotJSON", err)
	}
}

// One GitHub provider serves several repositories: lookup.path names the
// repository by {params.repo}, escaped as create.path escapes it, so each
// operation's lookup asks its own repository's issues through GitHub's
// issue search (https://docs.github.com/rest/reference/search).
func TestLookupPathNamesEachOperationsOwnParams(t *testing.T) {
	t.Parallel()
	rec, srv := newRecorder(t, answer(200, `{"total_count":1,"incomplete_results":false,"items":[{"number":12}]}`))
	cfg := mustV3(t, srv.URL, `    create: {path: '/repos/{params.owner}/{params.repo}/issues', body: '{"title": params.title, "body": reference}'}
    lookup:
      path: '/search/issues?q={reference}+repo:{params.owner}/{params.repo}'
      matches: response.items
      reference: string(match.number)
`)
	p := NewHTTP(cfg, HTTPOptions{})
	tests := []struct{ params, wantURI string }{
		{`{"owner":"acme","repo":"site","title":"t"}`, "/search/issues?q=op_1+repo:acme/site"},
		{`{"owner":"acme","repo":"docs & notes","title":"t"}`, "/search/issues?q=op_1+repo:acme/docs+%26+notes"},
	}
	for i, tt := range tests {
		res := p.Lookup(t.Context(), LookupRequest{ExternalKey: "op_1", Params: json.RawMessage(tt.params)})
		if res.Status != LookupFound || res.ProviderReference != "12" {
			t.Errorf("lookup for %s = %+v, want found 12", tt.params, res)
		}
		if got := rec.all()[i].uri; got != tt.wantURI {
			t.Errorf("lookup for %s asked %s, want %s", tt.params, got, tt.wantURI)
		}
	}
	if res := p.Lookup(t.Context(), LookupRequest{ExternalKey: "op_1", Params: json.RawMessage(`{"owner":"acme"}`)}); res.Status != LookupError || !strings.Contains(res.Error, "params.repo") || len(rec.all()) != 2 {
		t.Errorf("lookup without the repo param = %+v after %d requests; want an error naming params.repo and nothing sent", res, len(rec.all()))
	}
}
