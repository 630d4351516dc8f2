package sso_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/actledger/actledger/sso"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestAccessSectionMistakesNameTheirField(t *testing.T) {
	t.Parallel()
	ok := sso.OIDCSection{Issuer: "https://login.acme.example", ClientID: "console", ClientSecretEnv: "OIDC_SECRET"}
	rule := sso.PersonRule{When: `"ops" in claims.groups`, Tenant: "acme", Role: "operator"}
	tests := []struct {
		name    string
		section sso.Section
		field   string
		says    string
	}{
		{"no oidc block", sso.Section{People: []sso.PersonRule{rule}}, "oidc", "is required"},
		{"plain http issuer elsewhere than loopback", sso.Section{OIDC: &sso.OIDCSection{Issuer: "http://login.acme.example", ClientID: "c"}, People: []sso.PersonRule{rule}}, "oidc.issuer", "loopback"},
		{"no client id", sso.Section{OIDC: &sso.OIDCSection{Issuer: "https://login.acme.example"}, People: []sso.PersonRule{rule}}, "oidc.client_id", "is required"},
		{"the secret's variable unset", sso.Section{OIDC: &sso.OIDCSection{Issuer: "https://login.acme.example", ClientID: "c", ClientSecretEnv: "UNSET"}, People: []sso.PersonRule{rule}}, "oidc.client_secret_env", "UNSET is not set"},
		{"no rules", sso.Section{OIDC: &ok}, "people", "at least one rule"},
		{"an agent role", sso.Section{OIDC: &ok, People: []sso.PersonRule{{When: "true", Tenant: "acme", Role: "agent"}}}, "people[0].role", "approver or an operator"},
		{"a metrics role", sso.Section{OIDC: &ok, People: []sso.PersonRule{rule, {When: "true", Tenant: "acme", Role: "metrics"}}}, "people[1].role", "approver or an operator"},
		{"a condition that is not a bool", sso.Section{OIDC: &ok, People: []sso.PersonRule{{When: `"x"`, Tenant: "acme", Role: "approver"}}}, "people[0].when", "want a bool"},
		{"a condition that does not compile", sso.Section{OIDC: &ok, People: []sso.PersonRule{{When: `claims.groups contains`, Tenant: "acme", Role: "approver"}}}, "people[0].when", "does not compile"},
		{"a rule without a tenant", sso.Section{OIDC: &ok, People: []sso.PersonRule{{When: "true", Role: "approver"}}}, "people[0].tenant", "is required"},
		{"a scope with a space", sso.Section{OIDC: &ok, People: []sso.PersonRule{{When: "true", Tenant: "acme", Role: "approver", Scope: "pur chasing"}}}, "people[0].scope", "visible characters"},
		{"credentials in the issuer", sso.Section{OIDC: &sso.OIDCSection{Issuer: "https://u:p@login.acme.example", ClientID: "c"}, People: []sso.PersonRule{rule}}, "oidc.issuer", "no credentials"},
		{"the secret where its variable's name belongs", sso.Section{OIDC: &sso.OIDCSection{Issuer: "https://login.acme.example", ClientID: "c", ClientSecretEnv: "s3cr3t-value!"}, People: []sso.PersonRule{rule}}, "oidc.client_secret_env", "is not an environment variable name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, errs := tt.section.Compile(env(map[string]string{"OIDC_SECRET": "s"}))
			var found bool
			for _, err := range errs {
				var fe *sso.FieldError
				if errors.As(err, &fe) && fe.Field == tt.field && strings.Contains(err.Error(), tt.says) {
					found = true
				}
			}
			if !found {
				t.Errorf("errors %v, want one on %s saying %q", errs, tt.field, tt.says)
			}
			for _, err := range errs {
				if strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("an error shows the secret: %v", err)
				}
			}
		})
	}
}

func TestTheFirstMatchingRuleDecidesAndNoMatchGivesNothing(t *testing.T) {
	t.Parallel()
	a, errs := sso.Section{
		OIDC: &sso.OIDCSection{Issuer: "http://127.0.0.1:9999", ClientID: "console"},
		People: []sso.PersonRule{
			{When: `"purchasing-approvers" in claims.groups`, Tenant: "acme", Role: "approver", Scope: "purchasing"},
			{When: `claims.email.endsWith("@acme.example") && "ops" in claims.groups`, Tenant: "acme", Role: "operator"},
			{When: `claims.email.endsWith("@acme.example")`, Tenant: "acme", Role: "approver"},
		},
	}.Compile(env(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	tests := []struct {
		name   string
		claims map[string]any
		want   sso.Grant
		ok     bool
	}{
		{"first rule", map[string]any{"email": "a@acme.example", "groups": []any{"purchasing-approvers", "ops"}}, sso.Grant{Rule: 0, Tenant: "acme", Role: "approver", Scope: "purchasing"}, true},
		{"second rule", map[string]any{"email": "b@acme.example", "groups": []any{"ops"}}, sso.Grant{Rule: 1, Tenant: "acme", Role: "operator"}, true},
		{"a groups string fails the rules that read it, not the rest", map[string]any{"email": "c@acme.example", "groups": "ops"}, sso.Grant{Rule: 2, Tenant: "acme", Role: "approver"}, true},
		{"no email, no groups", map[string]any{"sub": "x"}, sso.Grant{}, false},
		{"another domain", map[string]any{"email": "d@elsewhere.example", "groups": []any{"sales"}}, sso.Grant{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok, _ := a.Match(tt.claims)
			if got != tt.want || ok != tt.ok {
				t.Errorf("Match = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestReturnPathStaysInTheConsole(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"/console/approvals":                "/console/approvals",
		"/console/operations?state=unknown": "/console/operations?state=unknown",
		"":                                  "/console/",
		"//evil.example/console/":           "/console/",
		"https://evil.example/console/":     "/console/",
		"/\\evil.example":                   "/console/",
		"/console/../v1/operations":         "/console/",
		"javascript:alert(1)":               "/console/",
		"/v1/operations":                    "/console/",
	}
	for in, want := range tests {
		if got := sso.ReturnPath(in); got != want {
			t.Errorf("ReturnPath(%q) = %q, want %q", in, got, want)
		}
	}
}
