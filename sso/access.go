package sso

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/celexpr"
)

// The roles a rule may give: people approve and work the review queue.
// Agent and metrics roles belong to machines and are refused at load.
const (
	RoleApprover = "approver"
	RoleOperator = "operator"
)

// RuleCostLimit bounds the work of one rule's evaluation (CEL's cost
// units): a rule reads a handful of claims.
const RuleCostLimit = 10_000

// Section is the providers file's access: section as it is written;
// Compile checks it.
type Section struct {
	OIDC   *OIDCSection `yaml:"oidc"`
	People []PersonRule `yaml:"people"`
}

// OIDCSection is access.oidc: the identity provider and the console's
// client there.
type OIDCSection struct {
	Issuer          string   `yaml:"issuer"`
	ClientID        string   `yaml:"client_id"`
	ClientSecretEnv string   `yaml:"client_secret_env"`
	Scopes          []string `yaml:"scopes"`
}

// PersonRule is one entry of access.people as it is written.
type PersonRule struct {
	When   string `yaml:"when"`
	Tenant string `yaml:"tenant"`
	Role   string `yaml:"role"`
	Scope  string `yaml:"scope"`
}

// Access is a compiled access: section: how people sign in and what
// each may do.
type Access struct {
	// Issuer is the identity provider's issuer URL; its discovery
	// document is at Issuer + "/.well-known/openid-configuration".
	Issuer string
	// ClientID is the console's client at the identity provider, the
	// audience its ID tokens must name.
	ClientID string
	// ClientSecretEnv names the variable that holds the client secret;
	// empty for a public client (PKCE alone).
	ClientSecretEnv string
	// Scopes are asked for beside openid; default email, profile.
	Scopes []string
	// Rules are tried in order; the first that matches decides.
	Rules []Rule

	clientSecret string
}

// ClientSecret is the secret read from ClientSecretEnv when the file
// loaded.
func (a *Access) ClientSecret() string { return a.clientSecret }

// Rule is one entry of access.people.
type Rule struct {
	// When is the rule's CEL condition over claims, the ID token's.
	When string
	// Tenant is the name of the tenant it gives.
	Tenant string
	// Role is RoleApprover or RoleOperator.
	Role string
	// Scope is the access scope inside the tenant; empty: the whole
	// tenant.
	Scope string

	prg cel.Program
}

// FieldError is a problem in the access: section, naming where.
type FieldError struct {
	// Field is the key, e.g. "oidc.issuer" or "people[2].when".
	Field string
	Err   error
}

func (e *FieldError) Error() string { return fmt.Sprintf("access: %s: %v", e.Field, e.Err) }

func (e *FieldError) Unwrap() error { return e.Err }

var ruleEnv = sync.OnceValue(func() *cel.Env {
	return celexpr.NewEnv(cel.Variable("claims", cel.MapType(cel.StringType, cel.DynType)))
})

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Compile checks the section and compiles its rules, reading the client
// secret through getenv; a section that is absent gives nil, nil.
// Every problem is reported.
func (s Section) Compile(getenv func(string) string) (*Access, []error) {
	if s.OIDC == nil && len(s.People) == 0 {
		return nil, nil
	}
	var errs []error
	bad := func(field string, format string, a ...any) {
		errs = append(errs, &FieldError{Field: field, Err: fmt.Errorf(format, a...)})
	}
	if s.OIDC == nil {
		bad("oidc", "is required with people: rules admit people an identity provider signed in")
		return nil, errs
	}
	// The issuer is kept as written: go-oidc compares it with the
	// discovery document's and the ID token's iss exactly, and some
	// issuers end in a slash.
	a := &Access{Issuer: s.OIDC.Issuer, ClientID: s.OIDC.ClientID,
		ClientSecretEnv: s.OIDC.ClientSecretEnv, Scopes: s.OIDC.Scopes}
	if err := checkIssuer(s.OIDC.Issuer); err != nil {
		bad("oidc.issuer", "%v", err)
	}
	if a.ClientID == "" {
		bad("oidc.client_id", "is required: the console's client at the identity provider")
	}
	if a.ClientSecretEnv != "" {
		switch {
		case !envName.MatchString(a.ClientSecretEnv):
			// Not quoted: a secret written where its variable's name
			// belongs must not reach a log.
			bad("oidc.client_secret_env", "is not an environment variable name (if it is the secret itself, put it in a variable and name that)")
		case getenv(a.ClientSecretEnv) == "":
			bad("oidc.client_secret_env", "the variable %s is not set", a.ClientSecretEnv)
		default:
			a.clientSecret = getenv(a.ClientSecretEnv)
		}
	}
	if len(a.Scopes) == 0 {
		a.Scopes = []string{"email", "profile"}
	}
	if len(s.People) == 0 {
		bad("people", "needs at least one rule: without one, no person is admitted")
	}
	for i, r := range s.People {
		field := fmt.Sprintf("people[%d]", i)
		rule, err := compileRule(r)
		if err != nil {
			errs = append(errs, &FieldError{Field: field + "." + err.field, Err: err.err})
			continue
		}
		a.Rules = append(a.Rules, rule)
	}
	return a, errs
}

type ruleError struct {
	field string
	err   error
}

func compileRule(r PersonRule) (Rule, *ruleError) {
	switch {
	case r.When == "":
		return Rule{}, &ruleError{"when", errors.New("is required: the condition over claims")}
	case r.Tenant == "":
		return Rule{}, &ruleError{"tenant", errors.New("is required")}
	case strings.TrimSpace(r.Tenant) == "" || len(r.Tenant) > maxTenantLength:
		return Rule{}, &ruleError{"tenant", fmt.Errorf("must be 1 to %d characters", maxTenantLength)}
	case r.Role != RoleApprover && r.Role != RoleOperator:
		return Rule{}, &ruleError{"role", fmt.Errorf("%q: a person may be an approver or an operator (agent and metrics roles are for machines' tokens)", r.Role)}
	case r.Scope != "" && auth.CheckScope(r.Scope) != nil:
		return Rule{}, &ruleError{"scope", auth.CheckScope(r.Scope)}
	}
	env := ruleEnv()
	ast, err := celexpr.Compile(env, r.When)
	if err != nil {
		return Rule{}, &ruleError{"when", err}
	}
	if !celexpr.Fits(ast.OutputType(), types.BoolKind) {
		return Rule{}, &ruleError{"when", fmt.Errorf("gives %s, want a bool", ast.OutputType())}
	}
	prg, err := celexpr.Program(env, ast, RuleCostLimit)
	if err != nil {
		return Rule{}, &ruleError{"when", err}
	}
	return Rule{When: r.When, Tenant: r.Tenant, Role: r.Role, Scope: r.Scope, prg: prg}, nil
}

// maxTenantLength bounds a rule's tenant name as token creation bounds
// a token's (auth.Tokens.Create).
const maxTenantLength = 128

// checkIssuer: an issuer is an https URL, or http on a loopback host
// (a test or a local identity provider): over plain http elsewhere,
// anyone on the path could hand out keys and tokens.
func checkIssuer(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return errors.New("is not an issuer URL such as https://login.example.com (no credentials, query or fragment)")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if ip := net.ParseIP(u.Hostname()); (ip != nil && ip.IsLoopback()) || u.Hostname() == "localhost" {
			return nil
		}
		return fmt.Errorf("%q: an issuer over plain http is accepted only on a loopback host", raw)
	}
	return fmt.Errorf("%q: want https", raw)
}

// Grant is what the first matching rule gives a person.
type Grant struct {
	// Rule is the matching rule's index in access.people.
	Rule   int
	Tenant string
	Role   string
	Scope  string
}

// Match tries the rules in order over claims and returns the first that
// holds. A rule whose evaluation fails (a claim it reads is absent or of
// another type, e.g. groups a string where a list was expected) does not
// match; its error is returned in skipped for the log. No rule: ok false,
// never a default.
func (a *Access) Match(claims map[string]any) (g Grant, ok bool, skipped []error) {
	for i, r := range a.Rules {
		out, _, err := r.prg.Eval(map[string]any{"claims": claims})
		if err != nil {
			skipped = append(skipped, fmt.Errorf("people[%d]: %w", i, err))
			continue
		}
		if b, isBool := out.Value().(bool); isBool && b {
			return Grant{Rule: i, Tenant: r.Tenant, Role: r.Role, Scope: r.Scope}, true, skipped
		}
	}
	return Grant{}, false, skipped
}
