package provider

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/actledger/actledger/webhook"
)

// compile compiles and type-checks the provider's expressions and reads
// its credential and webhook secret from getenv, once, when the registry
// is built: a file that cannot work stops the start, naming the provider,
// the field and (for a variable) the variable, never its value.
func (c *Config) compile(getenv func(string) string) []*FieldError {
	var errs []*FieldError
	bad := func(field string, err error) {
		errs = append(errs, &FieldError{Provider: c.Name, Field: field, Err: err})
	}
	e := envs()
	compile := func(field, src string, env *cel.Env, what string, kinds []types.Kind) *expr {
		if src == "" {
			return nil
		}
		p, err := compileExpr(env, src, what, kinds)
		if err != nil {
			bad(field, err)
			return nil
		}
		return p
	}
	var problems []fieldProblem
	c.credential, problems = c.Auth.resolve(getenv)
	for _, p := range problems {
		bad(p.field, p.err)
	}
	for name, value := range c.Headers {
		switch canonical := http.CanonicalHeaderKey(name); {
		case !headerNamePattern.MatchString(name):
			bad("headers", fmt.Errorf("%q is not a valid HTTP header name", name))
		case strings.ContainsAny(value, "\r\n\x00"):
			bad("headers."+name, errors.New("must not contain CR, LF or NUL"))
		case slices.Contains(reservedHeaders, canonical):
			bad("headers."+name, fmt.Errorf("%s is set by actledger (credentials go under auth)", canonical))
		case c.credential != nil && canonical == c.credential.header,
			c.Idempotency != nil && canonical == http.CanonicalHeaderKey(c.Idempotency.Header):
			bad("headers."+name, fmt.Errorf("%s is set by actledger from auth or idempotency", canonical))
		}
	}
	for i, name := range c.Evidence.Keep {
		if name == "" || (name == KeepAll && len(c.Evidence.Keep) > 1) {
			bad(fmt.Sprintf("evidence.keep[%d]", i), fmt.Errorf("must be a field name, or %q alone", KeepAll))
		}
	}
	switch c.Create.Encoding {
	case "", EncodingJSON, EncodingForm:
	default:
		bad("create.encoding", fmt.Errorf(`must be "json" or "form", got %q`, c.Create.Encoding))
	}
	if _, err := pathParams(c.Create.Path); err != nil {
		bad("create.path", err)
	}
	if c.Lookup != nil {
		if _, err := pathParams(c.Lookup.Path); err != nil {
			bad("lookup.path", err)
		}
	}
	p := &c.compiled
	p.body = compile("create.body", c.Create.Body, e.body, "a map", kindsMap)
	p.reference = compile("create.reference", c.Create.Reference, e.answer, "a string or an integer", kindsID)
	if c.Lookup != nil {
		p.matches = compile("lookup.matches", c.Lookup.Matches, e.answer, "a list", kindsList)
		p.matchReference = compile("lookup.reference", c.Lookup.Reference, e.match, "a string or an integer", kindsID)
		p.complete = compile("lookup.complete", c.Lookup.Complete, e.answer, "a bool", kindsBool)
	}
	p.outcomes = nil
	if len(c.Outcomes) > 0 {
		p.outcomes = make([]*expr, len(c.Outcomes))
	}
	for i, r := range c.Outcomes {
		field := fmt.Sprintf("outcomes[%d]", i)
		if r.When == "" {
			bad(field+".when", errors.New("is required"))
		} else {
			p.outcomes[i] = compile(field+".when", r.When, e.answer, "a bool", kindsBool)
		}
		if !r.Outcome.valid() {
			bad(field+".outcome", fmt.Errorf("must be one of %s, got %q", quoted(Outcomes), r.Outcome))
		}
		if strings.TrimSpace(r.Reason) == "" {
			bad(field+".reason", errors.New("is required: it says in the attempt's event why the answer means this"))
		}
	}
	if w := c.Webhook; w != nil {
		if c.WebhookSecretEnv != "" {
			bad("webhook_secret_env", errors.New("cannot be given with webhook: put the variable in webhook.secret_env"))
		}
		scheme, schemeErr := webhook.ParseScheme(string(c.SignatureScheme()))
		if schemeErr != nil {
			bad("webhook.signature", schemeErr)
		}
		switch {
		case scheme == webhook.SchemeHMAC && w.HMAC == nil:
			bad("webhook.hmac", errors.New("is required with signature: hmac: it names the header, the encoding and what is signed"))
		case scheme != webhook.SchemeHMAC && w.HMAC != nil:
			bad("webhook.hmac", fmt.Errorf("is only read with signature: hmac, and the signature is %q", scheme))
		case w.HMAC != nil:
			for _, p := range w.HMAC.Problems() {
				bad("webhook.hmac."+p.Field, p.Err)
			}
		}
		switch secrets := c.WebhookSecretsFrom(getenv); {
		case w.SecretEnv == "":
			bad("webhook.secret_env", errors.New("is required: a webhook scheme needs a secret to verify its signature"))
		case !envNamePattern.MatchString(w.SecretEnv):
			bad("webhook.secret_env", fmt.Errorf("%q is not an environment variable name (give the variable's name, never the secret)", w.SecretEnv))
		case len(secrets) == 0:
			bad("webhook.secret_env", fmt.Errorf("environment variable %s is not set or is empty", w.SecretEnv))
		case schemeErr == nil:
			for i, secret := range secrets {
				if err := scheme.CheckSecret(secret); err != nil {
					bad("webhook.secret_env", fmt.Errorf("secret %d of environment variable %s is not a %s secret", i+1, w.SecretEnv, scheme))
				}
			}
		}
		if c.Tenant == "" {
			bad("tenant", errors.New("is required for a provider that sends webhooks: evidence that matches no operation belongs to this tenant, and is never shown to other tenants"))
		}
		for _, f := range []struct {
			field, src string
			into       **expr
			what       string
			kinds      []types.Kind
		}{
			{"webhook.event_id", w.EventID, &p.eventID, "a string or an integer", kindsID},
			{"webhook.reference", w.Reference, &p.webhookReference, "a string or an integer", kindsID},
			{"webhook.outcome", w.Outcome, &p.webhookOutcome, "a string", kindsString},
			{"webhook.provider_reference", w.ProviderReference, &p.webhookProviderRef, "a string or an integer", kindsID},
		} {
			if f.src == "" {
				bad(f.field, errors.New("is required with webhook"))
				continue
			}
			*f.into = compile(f.field, f.src, e.webhook, f.what, f.kinds)
		}
	}
	if s := c.Reconcile; s != nil {
		for _, p := range s.compile(e) {
			bad(p.field, p.err)
		}
	}
	if (c.Lookup != nil || c.Webhook != nil || c.WebhookSecretEnv != "" || c.Reconcile != nil) && !c.carriesReference() {
		bad("create.body", errors.New("must carry reference (in the body, the path or a header): the provider has a lookup, webhooks or reconcile, and nothing could ever find the effect without it"))
	}
	if c.usesV3() {
		if u, err := url.Parse(c.BaseURL); err == nil && u.Scheme == "http" && !isLoopback(u.Hostname()) {
			bad("base_url", fmt.Errorf("%q is plain http to a host that is not loopback: use https, so credentials and params are not sent in the clear", c.BaseURL))
		}
	}
	return errs
}

// reservedHeaders are set by actledger on every call; a file may not set
// them under headers.
var reservedHeaders = []string{"Authorization", "Content-Type", "Content-Length", "Host", "Transfer-Encoding", "Connection"}

// carriesReference reports whether every create request carries the
// operation's external key somewhere a lookup or a webhook can find it.
func (c *Config) carriesReference() bool {
	return c.Create.Body == "" || // v1's body: params with reference_param set
		(c.compiled.body != nil && c.compiled.body.usesReference) ||
		strings.Contains(c.Create.Path, ReferencePlaceholder) ||
		c.Idempotency != nil
}

// usesV3 reports whether the provider uses any key added by contract v3;
// a v1 provider keeps v1's rules exactly (plain http to any host among
// them).
func (c *Config) usesV3() bool {
	return c.Auth != nil || len(c.Headers) > 0 || len(c.Evidence.Keep) > 0 || c.Create.Encoding != "" || c.Create.Body != "" ||
		c.Create.Reference != "" || len(c.Outcomes) > 0 || c.Webhook != nil || c.Reconcile != nil ||
		(c.Lookup != nil && (c.Lookup.Matches != "" || c.Lookup.Reference != "" || c.Lookup.Complete != ""))
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func quoted[T ~string](values []T) string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(out, ", ")
}
