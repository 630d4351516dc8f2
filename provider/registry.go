package provider

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/actledger/actledger/action"
	"github.com/actledger/actledger/webhook"
)

// Registry is the validated providers configuration: the lookup from an action to the provider
// that executes it. It is read-only after construction and safe for concurrent use.
type Registry struct {
	providers     map[string]*Config
	actions       map[string]*Config
	contracts     map[string]*action.Contract
	notifications map[string]*Notification
}

// Load reads and validates the providers config file at path (YAML, or JSON since YAML is a
// superset of it), with the credentials and webhook secrets it names read from the process's
// environment.
func Load(path string) (*Registry, error) { return LoadEnv(path, os.Getenv) }

// LoadEnv is Load with the environment read through getenv.
func LoadEnv(path string, getenv func(string) string) (*Registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read providers config: %w", err)
	}
	reg, err := ParseEnv(data, getenv)
	if err != nil {
		return nil, fmt.Errorf("providers config %s: %w", path, err)
	}
	return reg, nil
}

// Parse decodes and validates a providers config document. Decoding is strict: an unknown key
// (a typo such as "idempotency_key") is an error rather than a silently ignored promise. All
// problems are reported together (errors.Join), each naming its provider, action and field.
// The credentials and webhook secrets the document names are read from the process's
// environment.
func Parse(data []byte) (*Registry, error) { return ParseEnv(data, os.Getenv) }

// ParseEnv is Parse with the environment read through getenv.
func ParseEnv(data []byte, getenv func(string) string) (*Registry, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var doc fileYAML
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("parse providers config: empty document")
		}
		return nil, fmt.Errorf("parse providers config: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("parse providers config: more than one YAML document")
	}
	f, convErrs := doc.file()
	f.Getenv = getenv
	reg, valErrs := newRegistry(f)
	if errs := firstReports(convErrs, valErrs); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return reg, nil
}

// firstReports is every conversion problem, then every validation problem
// of a field conversion did not already report: a value that could not be
// converted was left zero, and validation would report the same field
// again (e.g. "is required"), so only the first, more precise report is
// kept.
func firstReports(convErrs, valErrs []error) []error {
	reported := make(map[[3]string]bool, len(convErrs))
	errs := make([]error, 0, len(convErrs)+len(valErrs))
	for _, e := range convErrs {
		reported[place(e)] = true
		errs = append(errs, e)
	}
	for _, e := range valErrs {
		if !reported[place(e)] {
			errs = append(errs, e)
		}
	}
	return errs
}

// place is where in the file a problem is: its section, its entry's name
// and its field.
func place(err error) [3]string {
	var fe *FieldError
	var ae *action.FieldError
	switch {
	case errors.As(err, &ae):
		return [3]string{"actions", ae.Action, ae.Field}
	case errors.As(err, &fe) && fe.Notification != "":
		return [3]string{"notifications", fe.Notification, fe.Field}
	case errors.As(err, &fe):
		return [3]string{"providers", fe.Provider, fe.Field}
	}
	return [3]string{}
}

// NewRegistry validates f, fills defaults and returns the registry. Every problem is reported,
// a *FieldError or, for a problem in an action, an *action.FieldError, all joined with
// errors.Join. The registry keeps its own copies; later changes to f do not affect it.
func NewRegistry(f File) (*Registry, error) {
	reg, errs := newRegistry(f)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return reg, nil
}

// newRegistry validates and compiles each section of f: the providers, then the actions (each
// bound to its provider's config), then the notification receivers.
func newRegistry(f File) (*Registry, []error) {
	reg := &Registry{
		providers: make(map[string]*Config, len(f.Providers)),
		actions:   make(map[string]*Config, len(f.Actions)),
	}
	var errs []error
	getenv := f.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	for _, name := range slices.Sorted(maps.Keys(f.Providers)) {
		cfg := f.Providers[name]
		cfg.Name = name
		cfg = cfg.withDefaults()
		errs = appendProblems(errs, cfg.validate())
		errs = appendProblems(errs, cfg.compile(getenv))
		reg.providers[name] = &cfg
	}
	var actionErrs []*action.FieldError
	reg.contracts, actionErrs = action.Compile(f.Actions, func(name string) bool {
		_, ok := reg.providers[name]
		return ok
	})
	errs = appendProblems(errs, actionErrs)
	for name, contract := range reg.contracts {
		if cfg, ok := reg.providers[contract.Provider]; ok {
			reg.actions[name] = cfg
		}
	}
	var notifyErrs []*FieldError
	reg.notifications, notifyErrs = notifications(f.Notifications, getenv)
	errs = appendProblems(errs, notifyErrs)
	if len(errs) > 0 {
		return nil, errs
	}
	return reg, nil
}

// appendProblems appends each of problems to errs.
func appendProblems[E error](errs []error, problems []E) []error {
	for _, p := range problems {
		errs = append(errs, p)
	}
	return errs
}

// ForAction returns the config of the provider that executes action. ok is false for an action
// the configuration does not know (the API answers 422).
func (r *Registry) ForAction(action string) (cfg *Config, ok bool) {
	cfg, ok = r.actions[action]
	return cfg, ok
}

// Action returns the contract of the action named name (its schema, description, approval
// policy and business key); ok is false for an action the configuration does not know.
func (r *Registry) Action(name string) (contract *action.Contract, ok bool) {
	contract, ok = r.contracts[name]
	return contract, ok
}

// Provider returns the config of the named provider (e.g. for /v1/webhooks/{provider}).
func (r *Registry) Provider(name string) (cfg *Config, ok bool) {
	cfg, ok = r.providers[name]
	return cfg, ok
}

// Actions returns the known action names, sorted.
func (r *Registry) Actions() []string {
	return slices.Sorted(maps.Keys(r.actions))
}

// Providers returns every provider config, sorted by name.
func (r *Registry) Providers() []*Config {
	out := make([]*Config, 0, len(r.providers))
	for _, name := range slices.Sorted(maps.Keys(r.providers)) {
		out = append(out, r.providers[name])
	}
	return out
}

// The *YAML types mirror the file layout. Durations are read as strings and counts as pointers so
// that conversion can name the field of a bad value and tell "left out" (default) from an explicit
// zero (an error: "max_attempts: 0" or "timeout: 0s" is never what anyone means).
type fileYAML struct {
	Providers     map[string]providerYAML     `yaml:"providers"`
	Actions       action.Section              `yaml:"actions"`
	Notifications map[string]notificationYAML `yaml:"notifications"`
}

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
	SecretEnv         string `yaml:"secret_env"`
	Signature         string `yaml:"signature"`
	EventID           string `yaml:"event_id"`
	Reference         string `yaml:"reference"`
	Outcome           string `yaml:"outcome"`
	ProviderReference string `yaml:"provider_reference"`
}

type idempotencyYAML struct {
	Header    string  `yaml:"header"`
	Retention *string `yaml:"retention"`
}

type lookupYAML struct {
	Path          string  `yaml:"path"`
	Matches       string  `yaml:"matches"`
	Reference     string  `yaml:"reference"`
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

// file converts the decoded document, collecting errors for values that cannot be converted.
func (doc fileYAML) file() (File, []error) {
	f := File{
		Providers:     make(map[string]Config, len(doc.Providers)),
		Notifications: make(map[string]Notification, len(doc.Notifications)),
	}
	for name, n := range doc.Notifications {
		f.Notifications[name] = Notification{Name: name, URL: n.URL, SecretEnv: n.SecretEnv, Tenant: n.Tenant, Events: n.Events}
	}
	var errs []*FieldError
	var actionErrs []*action.FieldError
	for _, name := range slices.Sorted(maps.Keys(doc.Providers)) {
		p := doc.Providers[name]
		bad := func(field string, err error) {
			errs = append(errs, &FieldError{Provider: name, Field: field, Err: err})
		}
		// duration converts an optional duration; positive demands > 0 when given explicitly.
		// A bad value is reported here and left zero.
		duration := func(field string, s *string, positive bool) Duration {
			if s == nil {
				return Duration{}
			}
			d, err := ParseDuration(*s)
			switch {
			case err != nil:
				bad(field, err)
			case d.Duration < 0:
				bad(field, fmt.Errorf("must not be negative, got %s", d))
			case d.Duration == 0 && positive:
				bad(field, errors.New("must be positive (leave it out for the default)"))
			default:
				return d
			}
			return Duration{}
		}
		cfg := Config{
			Name:        name,
			BaseURL:     p.BaseURL,
			Account:     p.Account,
			Environment: p.Environment,
			Timeout:     duration("timeout", p.Timeout, true),
			Headers:     p.Headers,
			Create: Endpoint{Method: p.Create.Method, Path: p.Create.Path, Encoding: Encoding(strings.TrimSpace(p.Create.Encoding)),
				Body: strings.TrimSpace(p.Create.Body), Reference: strings.TrimSpace(p.Create.Reference)},
			ReferenceParam:   strings.TrimSpace(p.ReferenceParam),
			ReferenceField:   strings.TrimSpace(p.ReferenceField),
			WebhookSecretEnv: p.WebhookSecretEnv,
			Tenant:           strings.TrimSpace(p.Tenant),
			Retry: RetryPolicy{
				Initial:    duration("retry.initial", p.Retry.Initial, true),
				Max:        duration("retry.max", p.Retry.Max, true),
				MaxElapsed: duration("retry.max_elapsed", p.Retry.MaxElapsed, true),
			},
			Review: ReviewPolicy{
				Owner:    strings.TrimSpace(p.Review.Owner),
				Deadline: duration("review.deadline", p.Review.Deadline, true),
			},
		}
		cfg.Breaker.Cooldown = duration("breaker.cooldown", p.Breaker.Cooldown, true)
		if p.Breaker.Failures != nil {
			if *p.Breaker.Failures < 1 {
				bad("breaker.failures", fmt.Errorf("must be at least 1, got %d", *p.Breaker.Failures))
			}
			cfg.Breaker.Failures = *p.Breaker.Failures
		}
		if p.Retry.MaxAttempts != nil {
			if *p.Retry.MaxAttempts < 1 {
				bad("retry.max_attempts", fmt.Errorf("must be at least 1, got %d", *p.Retry.MaxAttempts))
			}
			cfg.Retry.MaxAttempts = *p.Retry.MaxAttempts
		}
		if p.Idempotency != nil {
			cfg.Idempotency = &Idempotency{
				Header:    strings.TrimSpace(p.Idempotency.Header),
				Retention: duration("idempotency.retention", p.Idempotency.Retention, true),
			}
		}
		if p.Auth != nil {
			cfg.Auth = &Auth{BearerEnv: strings.TrimSpace(p.Auth.BearerEnv)}
			if b := p.Auth.Basic; b != nil {
				cfg.Auth.Basic = &BasicAuth{UsernameEnv: strings.TrimSpace(b.UsernameEnv), PasswordEnv: strings.TrimSpace(b.PasswordEnv)}
			}
			if h := p.Auth.Header; h != nil {
				cfg.Auth.Header = &HeaderAuth{Name: strings.TrimSpace(h.Name), ValueEnv: strings.TrimSpace(h.ValueEnv)}
			}
		}
		if p.Evidence != nil {
			cfg.Evidence.Keep = p.Evidence.Keep
		}
		for _, o := range p.Outcomes {
			cfg.Outcomes = append(cfg.Outcomes, OutcomeRule{When: strings.TrimSpace(o.When), Outcome: Outcome(strings.TrimSpace(o.Outcome)), Reason: strings.TrimSpace(o.Reason)})
		}
		if w := p.Webhook; w != nil {
			cfg.Webhook = &Webhook{
				SecretEnv: strings.TrimSpace(w.SecretEnv), Signature: webhook.Scheme(strings.TrimSpace(w.Signature)),
				EventID: strings.TrimSpace(w.EventID), Reference: strings.TrimSpace(w.Reference),
				Outcome: strings.TrimSpace(w.Outcome), ProviderReference: strings.TrimSpace(w.ProviderReference),
			}
		}
		if p.Lookup != nil {
			cfg.Lookup = &Lookup{
				Path:          p.Lookup.Path,
				Matches:       strings.TrimSpace(p.Lookup.Matches),
				Reference:     strings.TrimSpace(p.Lookup.Reference),
				VisibilityLag: duration("lookup.visibility_lag", p.Lookup.VisibilityLag, false),
			}
		}
		f.Providers[name] = cfg
	}
	f.Actions, actionErrs = doc.Actions.Contracts()
	return f, appendProblems(appendProblems(nil, errs), actionErrs)
}
