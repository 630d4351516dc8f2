package provider

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/actledger/actledger/webhook"
)

// The *YAML types mirror the providers: section's layout. Durations are read as strings and
// counts as pointers so that conversion can name the field of a bad value and tell "left out"
// (default) from an explicit zero (an error: "max_attempts: 0" or "timeout: 0s" is never what
// anyone means).
type providerYAML struct {
	BaseURL          string            `yaml:"base_url"`
	Account          string            `yaml:"account"`
	Environment      string            `yaml:"environment"`
	Timeout          *string           `yaml:"timeout"`
	Auth             *authYAML         `yaml:"auth"`
	Headers          map[string]string `yaml:"headers"`
	Create           endpointYAML      `yaml:"create"`
	ReferenceParam   string            `yaml:"reference_param"`
	ReferenceField   string            `yaml:"reference_field"`
	Idempotency      *idempotencyYAML  `yaml:"idempotency"`
	Lookup           *lookupYAML       `yaml:"lookup"`
	Outcomes         []outcomeYAML     `yaml:"outcomes"`
	Webhook          *webhookYAML      `yaml:"webhook"`
	Evidence         *evidenceYAML     `yaml:"evidence"`
	WebhookSecretEnv string            `yaml:"webhook_secret_env"`
	Tenant           string            `yaml:"tenant"`
	Retry            retryYAML         `yaml:"retry"`
	Review           reviewYAML        `yaml:"review"`
	Breaker          breakerYAML       `yaml:"breaker"`
	Reconcile        *reconcileYAML    `yaml:"reconcile"`
}

type endpointYAML struct {
	Method    string `yaml:"method"`
	Path      string `yaml:"path"`
	Encoding  string `yaml:"encoding"`
	Body      string `yaml:"body"`
	Reference string `yaml:"reference"`
}

type authYAML struct {
	BearerEnv string `yaml:"bearer_env"`
	Basic     *struct {
		UsernameEnv string `yaml:"username_env"`
		PasswordEnv string `yaml:"password_env"`
	} `yaml:"basic"`
	Header *struct {
		Name     string `yaml:"name"`
		ValueEnv string `yaml:"value_env"`
	} `yaml:"header"`
}

type evidenceYAML struct {
	Keep []string `yaml:"keep"`
}

type outcomeYAML struct {
	When    string `yaml:"when"`
	Outcome string `yaml:"outcome"`
	Reason  string `yaml:"reason"`
}

type webhookYAML struct {
	SecretEnv         string    `yaml:"secret_env"`
	Signature         string    `yaml:"signature"`
	EventID           string    `yaml:"event_id"`
	Reference         string    `yaml:"reference"`
	Outcome           string    `yaml:"outcome"`
	ProviderReference string    `yaml:"provider_reference"`
	HMAC              *hmacYAML `yaml:"hmac"`
}

type hmacYAML struct {
	Header          string `yaml:"header"`
	Encoding        string `yaml:"encoding"`
	Prefix          string `yaml:"prefix"`
	TimestampHeader string `yaml:"timestamp_header"`
	Signed          string `yaml:"signed"`
}

type idempotencyYAML struct {
	Header    string  `yaml:"header"`
	Retention *string `yaml:"retention"`
}

type lookupYAML struct {
	Path          string  `yaml:"path"`
	Matches       string  `yaml:"matches"`
	Reference     string  `yaml:"reference"`
	Complete      string  `yaml:"complete"`
	VisibilityLag *string `yaml:"visibility_lag"`
}

type retryYAML struct {
	MaxAttempts *int    `yaml:"max_attempts"`
	Initial     *string `yaml:"initial"`
	Max         *string `yaml:"max"`
	MaxElapsed  *string `yaml:"max_elapsed"`
}

type breakerYAML struct {
	Failures *int    `yaml:"failures"`
	Cooldown *string `yaml:"cooldown"`
}

type reviewYAML struct {
	Owner    string  `yaml:"owner"`
	Deadline *string `yaml:"deadline"`
}

// providersSection converts the providers: section, by provider name. A value that cannot be
// converted is reported, naming the provider and the field.
func providersSection(doc map[string]providerYAML) (map[string]Config, []*FieldError) {
	out := make(map[string]Config, len(doc))
	var errs []*FieldError
	for _, name := range slices.Sorted(maps.Keys(doc)) {
		cfg, bad := doc[name].config(name)
		out[name] = cfg
		errs = append(errs, bad...)
	}
	return out, errs
}

// config converts the entry of provider name.
func (p providerYAML) config(name string) (Config, []*FieldError) {
	c := &conversion{provider: name}
	cfg := Config{
		Name:             name,
		BaseURL:          p.BaseURL,
		Account:          p.Account,
		Environment:      p.Environment,
		Timeout:          c.duration("timeout", p.Timeout, true),
		Auth:             p.Auth.auth(),
		Headers:          p.Headers,
		Create:           p.Create.endpoint(),
		ReferenceParam:   strings.TrimSpace(p.ReferenceParam),
		ReferenceField:   strings.TrimSpace(p.ReferenceField),
		WebhookSecretEnv: p.WebhookSecretEnv,
		Outcomes:         outcomeRules(p.Outcomes),
		Webhook:          p.Webhook.webhook(),
		Evidence:         p.Evidence.evidence(),
		Tenant:           strings.TrimSpace(p.Tenant),
		Retry: RetryPolicy{
			Initial:    c.duration("retry.initial", p.Retry.Initial, true),
			Max:        c.duration("retry.max", p.Retry.Max, true),
			MaxElapsed: c.duration("retry.max_elapsed", p.Retry.MaxElapsed, true),
		},
		Review: ReviewPolicy{
			Owner:    strings.TrimSpace(p.Review.Owner),
			Deadline: c.duration("review.deadline", p.Review.Deadline, true),
		},
		Breaker: BreakerPolicy{
			Cooldown: c.duration("breaker.cooldown", p.Breaker.Cooldown, true),
			Failures: c.count("breaker.failures", p.Breaker.Failures),
		},
	}
	cfg.Retry.MaxAttempts = c.count("retry.max_attempts", p.Retry.MaxAttempts)
	cfg.Idempotency = p.Idempotency.idempotency(c)
	cfg.Lookup = p.Lookup.lookup(c)
	cfg.Reconcile = p.Reconcile.statement(c)
	return cfg, c.errs
}

// conversion collects the problems of converting one provider's values.
type conversion struct {
	provider string
	errs     []*FieldError
}

func (c *conversion) bad(field string, err error) {
	c.errs = append(c.errs, &FieldError{Provider: c.provider, Field: field, Err: err})
}

// duration converts an optional duration; positive demands > 0 when given explicitly. A bad
// value is reported and left zero.
func (c *conversion) duration(field string, s *string, positive bool) Duration {
	if s == nil {
		return Duration{}
	}
	d, err := ParseDuration(*s)
	switch {
	case err != nil:
		c.bad(field, err)
	case d.Duration < 0:
		c.bad(field, fmt.Errorf("must not be negative, got %s", d))
	case d.Duration == 0 && positive:
		c.bad(field, errors.New("must be positive (leave it out for the default)"))
	default:
		return d
	}
	return Duration{}
}

// count converts an optional count, which must be at least 1 when given. A bad value is
// reported and kept: validation, which would report it again, defers to this first report.
func (c *conversion) count(field string, n *int) int {
	if n == nil {
		return 0
	}
	if *n < 1 {
		c.bad(field, fmt.Errorf("must be at least 1, got %d", *n))
	}
	return *n
}

func (y endpointYAML) endpoint() Endpoint {
	return Endpoint{Method: y.Method, Path: y.Path, Encoding: Encoding(strings.TrimSpace(y.Encoding)),
		Body: strings.TrimSpace(y.Body), Reference: strings.TrimSpace(y.Reference)}
}

func (y *authYAML) auth() *Auth {
	if y == nil {
		return nil
	}
	a := &Auth{BearerEnv: strings.TrimSpace(y.BearerEnv)}
	if b := y.Basic; b != nil {
		a.Basic = &BasicAuth{UsernameEnv: strings.TrimSpace(b.UsernameEnv), PasswordEnv: strings.TrimSpace(b.PasswordEnv)}
	}
	if h := y.Header; h != nil {
		a.Header = &HeaderAuth{Name: strings.TrimSpace(h.Name), ValueEnv: strings.TrimSpace(h.ValueEnv)}
	}
	return a
}

func (y *evidenceYAML) evidence() Evidence {
	if y == nil {
		return Evidence{}
	}
	return Evidence{Keep: y.Keep}
}

// outcomeRules converts the outcomes, nil when there are none.
func outcomeRules(ys []outcomeYAML) []OutcomeRule {
	var rules []OutcomeRule
	for _, o := range ys {
		rules = append(rules, OutcomeRule{When: strings.TrimSpace(o.When), Outcome: Outcome(strings.TrimSpace(o.Outcome)), Reason: strings.TrimSpace(o.Reason)})
	}
	return rules
}

func (y *webhookYAML) webhook() *Webhook {
	if y == nil {
		return nil
	}
	w := &Webhook{
		SecretEnv: strings.TrimSpace(y.SecretEnv), Signature: webhook.Scheme(strings.TrimSpace(y.Signature)),
		EventID: strings.TrimSpace(y.EventID), Reference: strings.TrimSpace(y.Reference),
		Outcome: strings.TrimSpace(y.Outcome), ProviderReference: strings.TrimSpace(y.ProviderReference),
	}
	if h := y.HMAC; h != nil {
		// The prefix and the signed template are kept as written: their spaces are signed.
		w.HMAC = &webhook.HMAC{Header: strings.TrimSpace(h.Header), Encoding: strings.TrimSpace(h.Encoding),
			Prefix: h.Prefix, TimestampHeader: strings.TrimSpace(h.TimestampHeader), Signed: h.Signed}
	}
	return w
}

func (y *idempotencyYAML) idempotency(c *conversion) *Idempotency {
	if y == nil {
		return nil
	}
	return &Idempotency{Header: strings.TrimSpace(y.Header), Retention: c.duration("idempotency.retention", y.Retention, true)}
}

// lookup converts the lookup; its visibility lag may be zero (an effect visible at once).
func (y *lookupYAML) lookup(c *conversion) *Lookup {
	if y == nil {
		return nil
	}
	return &Lookup{
		Path:          y.Path,
		Matches:       strings.TrimSpace(y.Matches),
		Reference:     strings.TrimSpace(y.Reference),
		Complete:      strings.TrimSpace(y.Complete),
		VisibilityLag: c.duration("lookup.visibility_lag", y.VisibilityLag, false),
	}
}
