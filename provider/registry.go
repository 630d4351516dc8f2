package provider

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/actledger/actledger/action"
	"github.com/actledger/actledger/sso"
)

// Registry is the validated providers configuration: the lookup from an action to the provider
// that executes it. It is read-only after construction and safe for concurrent use.
type Registry struct {
	providers     map[string]*Config
	actions       map[string]*Config
	contracts     map[string]*action.Contract
	notifications map[string]*Notification
	access        *sso.Access
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
	var se *sso.FieldError
	switch {
	case errors.As(err, &se):
		return [3]string{"access", "", se.Field}
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
	getenv := f.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	reg := &Registry{actions: make(map[string]*Config, len(f.Actions))}
	providers, providerErrs := compileProviders(f.Providers, getenv)
	contracts, actionErrs := action.Compile(f.Actions, func(name string) bool {
		_, ok := providers[name]
		return ok
	})
	receivers, receiverErrs := notifications(f.Notifications, getenv)
	access, accessErrs := f.Access.Compile(getenv)
	var errs []error
	errs = appendProblems(errs, providerErrs)
	errs = appendProblems(errs, actionErrs)
	errs = appendProblems(errs, receiverErrs)
	errs = append(errs, accessErrs...)
	if len(errs) > 0 {
		return nil, errs
	}
	for name, contract := range contracts {
		reg.actions[name] = providers[contract.Provider]
	}
	reg.providers, reg.contracts, reg.notifications, reg.access = providers, contracts, receivers, access
	return reg, nil
}

// compileProviders validates each provider, fills its defaults, compiles its expressions and
// reads its credential and webhook secret through getenv.
func compileProviders(doc map[string]Config, getenv func(string) string) (map[string]*Config, []*FieldError) {
	out := make(map[string]*Config, len(doc))
	var errs []*FieldError
	for _, name := range slices.Sorted(maps.Keys(doc)) {
		cfg := doc[name]
		cfg.Name = name
		cfg = cfg.withDefaults()
		errs = append(errs, cfg.validate()...)
		errs = append(errs, cfg.compile(getenv)...)
		out[name] = &cfg
	}
	return out, errs
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

// Access is the compiled access: section, how people sign in to the
// console and what each may do; nil when the file has none.
func (r *Registry) Access() *sso.Access { return r.access }

// Provider returns the config of the named provider (e.g. for /v1/webhooks/{provider}).
func (r *Registry) Provider(name string) (cfg *Config, ok bool) {
	cfg, ok = r.providers[name]
	return cfg, ok
}

// Actions returns the known action names, sorted.
func (r *Registry) Actions() []string {
	return slices.Sorted(maps.Keys(r.actions))
}

// LongestIdempotencyRetention is the longest idempotency.retention of the
// providers that honour keys (zero if none does): how long a supplier may
// still answer a resend under an operation's key with its first effect,
// so how long a pruned key's tombstone must outlive its prune
// (retention.Config.KeyTombstones).
func (r *Registry) LongestIdempotencyRetention() time.Duration {
	var longest time.Duration
	for _, c := range r.providers {
		if c.Idempotency != nil {
			longest = max(longest, c.Idempotency.Retention.Duration)
		}
	}
	return longest
}

// Providers returns every provider config, sorted by name.
func (r *Registry) Providers() []*Config {
	out := make([]*Config, 0, len(r.providers))
	for _, name := range slices.Sorted(maps.Keys(r.providers)) {
		out = append(out, r.providers[name])
	}
	return out
}

// fileYAML is the providers file as it is written, one field per section; each section is
// converted by the package that owns it.
type fileYAML struct {
	Providers     map[string]providerYAML     `yaml:"providers"`
	Actions       action.Section              `yaml:"actions"`
	Notifications map[string]notificationYAML `yaml:"notifications"`
	Access        sso.Section                 `yaml:"access"`
}

// file converts the decoded document section by section, collecting errors for values that
// cannot be converted.
func (doc fileYAML) file() (File, []error) {
	providers, providerErrs := providersSection(doc.Providers)
	actions, actionErrs := doc.Actions.Contracts()
	f := File{Providers: providers, Actions: actions, Notifications: notificationsSection(doc.Notifications), Access: doc.Access}
	var errs []error
	errs = appendProblems(errs, providerErrs)
	errs = appendProblems(errs, actionErrs)
	return f, errs
}
