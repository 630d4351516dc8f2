package provider

import (
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/actledger/actledger/action"
	"github.com/actledger/actledger/sso"
)

// Defaults for fields left out of the providers config. Zero values in a File mean these.
const (
	// DefaultTimeout bounds one call to a supplier, connect to last body byte, when the config
	// sets no timeout. The dispatcher shortens it to half its lease when that is less.
	DefaultTimeout = 10 * time.Second
	// DefaultMethod is the create request's method.
	DefaultMethod = "POST"
	// DefaultReferenceParam is the body field that carries the external key. It matches the
	// "reference" field of the webhook body, which carries the same key back.
	DefaultReferenceParam = "reference"
	// DefaultReferenceField is the response field that carries the supplier's reference.
	DefaultReferenceField = "id"
	// DefaultMaxAttempts is how many create attempts are made before the operation goes to
	// review with reason retries_exhausted.
	DefaultMaxAttempts = 5
	// DefaultRetryInitial is the first backoff delay.
	DefaultRetryInitial = 100 * time.Millisecond
	// DefaultRetryMax caps one backoff delay.
	DefaultRetryMax = 5 * time.Second
	// DefaultRetryMaxElapsed caps the time from the first attempt after which no new attempt
	// starts.
	DefaultRetryMaxElapsed = 60 * time.Second
	// DefaultBreakerFailures opens a provider's circuit after that many
	// consecutive attempts it refused or left unanswered.
	DefaultBreakerFailures = 5
	// DefaultBreakerCooldown is the first wait before an open circuit's
	// probe; it doubles while probes fail, up to MaxBreakerCooldown.
	DefaultBreakerCooldown = 10 * time.Second
	// MaxBreakerCooldown caps the wait between probes.
	MaxBreakerCooldown = 5 * time.Minute
	// DefaultReviewOwner owns review items of a provider that names no owner.
	DefaultReviewOwner = "operations"
	// DefaultReviewDeadline is how long a review item may stay open before it is overdue.
	DefaultReviewDeadline = 4 * time.Hour
)

// ReferencePlaceholder is replaced by the escaped external key in a lookup path.
const ReferencePlaceholder = "{reference}"

var (
	// providerNamePattern: the provider name becomes a NATS subject token and a URL path segment
	// (/v1/webhooks/{provider}), so it is kept to characters that are safe in both.
	providerNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	// headerNamePattern is an HTTP field-name token (RFC 9110 §5.1).
	headerNamePattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	// envNamePattern is a portable environment variable name.
	envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// File is the validated content of a providers config file: which supplier serves which action
// and how. Build one in code and pass it to NewRegistry, or let Parse/Load read the YAML (or
// JSON) form documented in docs/contract.md ("Providers file"), whose keys are given on each field.
type File struct {
	// Providers by name (yaml "providers").
	Providers map[string]Config
	// Actions by name (yaml "actions"), each naming its provider and its
	// contract.
	Actions map[string]action.Contract
	// Notifications are the receivers of signed notifications by name
	// (yaml "notifications"); their secrets are read through Getenv.
	Notifications map[string]Notification
	// Access is the access: section (yaml "access"): how people sign in
	// to the console with the organisation's identity provider and what
	// each may do; checked and compiled with the rest.
	Access sso.Section
	// Getenv reads the environment variables the providers name
	// (credentials, webhook secrets) when the registry is built; nil is
	// os.Getenv.
	Getenv func(string) string
}

// Config describes one supplier: where it is, how to create an effect there, what it promises
// about idempotency and lookups, and how failures are retried and reviewed. A Config obtained
// from a Registry is validated and has every default filled; it must not be modified.
type Config struct {
	// Name is the provider's name, the key of its entry in the file.
	Name string
	// BaseURL is the supplier's http(s) base URL (yaml "base_url"); paths are appended to it.
	BaseURL string
	// Account and Environment identify where effects are created (yaml "account",
	// "environment"). They are recorded on every attempt and lookup so that evidence from the
	// wrong account or environment is never trusted.
	Account, Environment string
	// Timeout bounds one call (yaml "timeout"). Left out, it is 10s, except
	// for the dispatcher's calls, which must end within their lease: there it
	// is min(10s, LEASE_DURATION/2) (see DispatchTimeout).
	Timeout Duration
	// timeoutDefaulted records that Timeout was left out and filled with
	// DefaultTimeout, so that the dispatcher can shorten a default that
	// does not fit its lease while refusing an explicit timeout that does
	// not.
	timeoutDefaulted bool
	// Auth is how the supplier authenticates calls (yaml "auth"); nil sends
	// no credential. Its values come from environment variables, read once
	// when the registry is built.
	Auth *Auth
	// Headers are fixed, non-secret headers sent with every call (yaml
	// "headers"), e.g. an API version.
	Headers map[string]string
	// Create is the request that creates the effect (yaml "create").
	Create Endpoint
	// ReferenceParam is the body field the external key is written to (yaml "reference_param");
	// default "reference".
	ReferenceParam string
	// ReferenceField is the response field holding the supplier's reference (yaml
	// "reference_field"); default "id".
	ReferenceField string
	// Idempotency is the supplier's idempotency-key contract (yaml "idempotency"); nil when the
	// supplier ignores keys.
	Idempotency *Idempotency
	// Lookup is how to ask the supplier whether an effect exists (yaml "lookup"); nil when the
	// supplier offers no lookup.
	Lookup *Lookup
	// WebhookSecretEnv names the environment variable holding the webhook signing secret(s)
	// (yaml "webhook_secret_env"); the secret itself never appears in the file.
	WebhookSecretEnv string
	// Outcomes are the supplier's own error meanings (yaml "outcomes"),
	// tried in order on every answer with a status before the default
	// table of [Classify]; the first whose When holds decides.
	Outcomes []OutcomeRule
	// Webhook is how the supplier signs and shapes its webhooks (yaml
	// "webhook"). Nil with WebhookSecretEnv set is v1's shape: actledger's
	// own signature and body.
	Webhook *Webhook
	// Evidence says which fields of the supplier's answers are kept
	// (yaml "evidence").
	Evidence Evidence
	// Tenant names the tenant that owns this provider account (yaml
	// "tenant", an extension of the contract): evidence that matches no
	// operation becomes that tenant's review item, seen and closed by that
	// tenant's operators only. Required when WebhookSecretEnv is set (a
	// webhook names no tenant, so the config must); a provider without
	// webhooks may leave it empty, and its unmatched evidence is then shown
	// to no tenant rather than to all.
	Tenant string
	// Retry is the retry policy for not-executed attempts (yaml "retry").
	Retry RetryPolicy
	// Review is who owns this provider's review items and how fast (yaml "review").
	Review ReviewPolicy
	// Breaker is when the provider's circuit opens and how it is probed
	// (yaml "breaker"): an outage there stops new attempts instead of
	// spending every operation's retries and filling the review queue.
	Breaker BreakerPolicy
	// Reconcile is how the supplier's own records are listed and compared
	// with the ledger (yaml "reconcile"); nil when the provider has none.
	Reconcile *Statement

	// compiled holds the file's expressions, compiled when the registry
	// is built; credential is the resolved Auth. A Config built in code
	// and never passed through a registry has neither, and sends v1's
	// body.
	compiled   programs
	credential *credential
}

// programs are a provider's compiled expressions; nil where the file
// leaves the expression out (v1's rule applies).
type programs struct {
	body, reference                    *expr
	matches, matchReference, complete  *expr
	outcomes                           []*expr
	eventID, webhookReference          *expr
	webhookOutcome, webhookProviderRef *expr
}

// Endpoint is the create request: a method and path relative to the base
// URL, and how its body is built and its answer read.
type Endpoint struct {
	// Method is the HTTP method (yaml "method"): POST (default), PUT or PATCH.
	Method string
	// Path starts with "/" (yaml "path"). It may hold {reference} (the
	// external key) and {params.NAME} (a top-level param), path-escaped
	// before a "?" and query-escaped after it.
	Path string
	// Encoding is the body's encoding (yaml "encoding"): "json" (default)
	// or "form" (application/x-www-form-urlencoded with nested keys as
	// Stripe writes them).
	Encoding Encoding
	// Body is a CEL expression over params, reference, account and
	// environment that gives the body as a map (yaml "body"). Empty: the
	// params with ReferenceParam set to the external key (v1).
	Body string
	// Reference is a CEL expression over response, status and headers that
	// gives the supplier's reference of a 2xx answer, a string or an
	// integer (yaml "reference"). Empty: the answer's ReferenceField.
	Reference string
}

// Encoding is how a create body is written.
type Encoding string

// The encodings of a create body.
const (
	// EncodingJSON is application/json, the default.
	EncodingJSON Encoding = "json"
	// EncodingForm is application/x-www-form-urlencoded, nested keys as
	// Stripe writes them: metadata[reference]=…, items[0][price]=….
	EncodingForm Encoding = "form"
)

// Idempotency is a supplier's promise that a repeated request with the same key header returns the
// stored result of the first instead of creating a second effect — for Retention after first use.
type Idempotency struct {
	// Header is the key header's name (yaml "header"), e.g. "Idempotency-Key".
	Header string
	// Retention is how long the supplier remembers a key (yaml "retention"); required.
	Retention Duration
}

// Lookup describes the supplier's lookup-by-reference endpoint.
type Lookup struct {
	// Path is relative to the base URL and contains "{reference}" (yaml "path").
	Path string
	// Matches is a CEL expression over response, status and headers that
	// gives the supplier's records for the reference, a list (yaml
	// "matches"): none is absent, one is found, two or more are a
	// duplicate effect. Empty: v1's rule (an object is one record, an
	// array its elements).
	Matches string
	// Reference is a CEL expression over match, one element of Matches,
	// that gives the supplier's reference of that record (yaml
	// "reference"). Empty: the record's ReferenceField.
	Reference string
	// Complete is a CEL expression over response, status and headers that
	// holds when a 200 answer is the whole truth (yaml "complete"), e.g.
	// `!response.incomplete_results` for a search that may stop at a
	// timeout. False: the lookup is inconclusive, neither found nor
	// absent, whatever records it holds. Empty: every answer is complete.
	Complete string
	// VisibilityLag is how long after a send an effect may still be invisible to the lookup (yaml
	// "visibility_lag"); an "absent" answer is believed only after it.
	VisibilityLag Duration
}

// RetryPolicy bounds retries of attempts classified not executed.
type RetryPolicy struct {
	// MaxAttempts is the total number of create attempts (yaml "max_attempts"); default 5.
	MaxAttempts int
	// Initial is the first backoff delay (yaml "initial"); default 100ms.
	Initial Duration
	// Max caps one delay (yaml "max"); default 5s.
	Max Duration
	// MaxElapsed is how long after the first attempt new attempts may start (yaml
	// "max_elapsed"); default 60s.
	MaxElapsed Duration
}

// BreakerPolicy is a provider's circuit breaker.
type BreakerPolicy struct {
	// Failures is how many consecutive attempts refused or left
	// unanswered (no answer, 429, 5xx) open the circuit (yaml
	// "failures"); default 5.
	Failures int
	// Cooldown is the wait before the first probe of an open circuit
	// (yaml "cooldown"); default 10s, doubling to 5m while probes fail.
	Cooldown Duration
}

// ReviewPolicy says who handles a provider's review items and by when.
type ReviewPolicy struct {
	// Owner is the team or person (yaml "owner"); default "operations".
	Owner string
	// Deadline is the time allowed to resolve an item (yaml "deadline"); default 4h.
	Deadline Duration
}

// Delay is the backoff before attempt number attempt+1, given that attempt attempts (counting
// from 1) have been made: Initial doubled per attempt, capped at Max. It is deterministic so a
// worker on another machine computes the same schedule; add jitter at the call site if wanted.
func (r RetryPolicy) Delay(attempt int) time.Duration {
	d := r.Initial.Duration
	if d <= 0 {
		d = DefaultRetryInitial
	}
	maxDelay := r.Max.Duration
	if maxDelay <= 0 {
		maxDelay = DefaultRetryMax
	}
	for i := 1; i < attempt && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay)
}

// Exhausted reports whether no further attempt may start: attempts made reached MaxAttempts, or
// MaxElapsed has passed since the first attempt.
func (r RetryPolicy) Exhausted(attempts int, firstAttempt, now time.Time) bool {
	maxAttempts := r.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
	}
	maxElapsed := r.MaxElapsed.Duration
	if maxElapsed <= 0 {
		maxElapsed = DefaultRetryMaxElapsed
	}
	return attempts >= maxAttempts || (!firstAttempt.IsZero() && now.Sub(firstAttempt) >= maxElapsed)
}

// IdempotencyValid reports whether a resend may rely on the supplier's idempotency contract:
// the supplier has one and the key, first sent at firstSent, is still inside its retention
// window at now. Measuring from our first send is conservative: the supplier's clock for the key
// starts later, when it received it. Past retention the supplier behaves as if it had no
// contract, and so must we. A key never sent (zero firstSent) has no stored result to rely on.
func (c *Config) IdempotencyValid(firstSent, now time.Time) bool {
	if c.Idempotency == nil || firstSent.IsZero() {
		return false
	}
	return now.Sub(firstSent) < c.Idempotency.Retention.Duration
}

// LookupBelievableAt is the earliest time at which an "absent" lookup answer can be believed for
// an operation last sent at lastSent: lastSent plus the visibility lag. Before it, the effect may
// exist but not be visible yet. Without a lookup (Lookup == nil) there is no answer to believe;
// callers must check Lookup first (the result is then lastSent).
func (c *Config) LookupBelievableAt(lastSent time.Time) time.Time {
	if c.Lookup == nil {
		return lastSent
	}
	return lastSent.Add(c.Lookup.VisibilityLag.Duration)
}

// DispatchTimeout is the timeout of one call made under a dispatch lease of
// length lease. A call must end before its lease does: a worker still
// waiting when the lease runs out is fenced, and whatever the supplier then
// answers is only evidence. So a timeout set in the config at or over the
// lease is an error naming both, while a timeout left out becomes
// min(DefaultTimeout, lease/2), so that a short LEASE_DURATION alone never
// stops a start.
func (c *Config) DispatchTimeout(lease time.Duration) (time.Duration, error) {
	if c.timeoutDefaulted || c.Timeout.Duration == 0 {
		if timeout := min(DefaultTimeout, lease/2); timeout > 0 {
			return timeout, nil
		}
		return 0, &FieldError{Provider: c.Name, Field: "timeout", Err: fmt.Errorf("LEASE_DURATION %s leaves no time for a call", lease)}
	}
	if c.Timeout.Duration >= lease {
		return 0, &FieldError{Provider: c.Name, Field: "timeout", Err: fmt.Errorf(
			"%s must be shorter than LEASE_DURATION %s, or a call still in flight could be fenced; lower the timeout or raise LEASE_DURATION",
			c.Timeout, lease)}
	}
	return c.Timeout.Duration, nil
}

// WebhookSecrets returns the webhook signing secrets from the environment variable named by
// webhook.secret_env or v1's WebhookSecretEnv. The variable may hold several comma-separated secrets so that a secret can be
// rotated without rejecting webhooks signed with the old one; blanks are trimmed and empty entries
// ignored. It returns nil when no variable is configured or it is empty, and then every webhook
// must be rejected.
func (c *Config) WebhookSecrets() [][]byte {
	return c.WebhookSecretsFrom(os.Getenv)
}

// WebhookSecretsFrom is WebhookSecrets with an injected environment lookup (for tests and for
// callers that read their environment once at start).
func (c *Config) WebhookSecretsFrom(getenv func(string) string) [][]byte {
	name := c.WebhookSecretEnv
	if c.Webhook != nil {
		name = c.Webhook.SecretEnv
	}
	if name == "" {
		return nil
	}
	var secrets [][]byte
	for s := range strings.SplitSeq(getenv(name), ",") {
		if s = strings.TrimSpace(s); s != "" {
			secrets = append(secrets, []byte(s))
		}
	}
	return secrets
}

// withDefaults returns a deep copy of c with zero values replaced by defaults.
func (c Config) withDefaults() Config {
	c.BaseURL = strings.TrimSpace(c.BaseURL)
	c.timeoutDefaulted = c.timeoutDefaulted || c.Timeout.Duration == 0
	c.Timeout = orDuration(c.Timeout, DefaultTimeout)
	c.Create.Method = cmp.Or(strings.ToUpper(strings.TrimSpace(c.Create.Method)), DefaultMethod)
	c.ReferenceParam = cmp.Or(c.ReferenceParam, DefaultReferenceParam)
	c.ReferenceField = cmp.Or(c.ReferenceField, DefaultReferenceField)
	if c.Idempotency != nil {
		idem := *c.Idempotency
		c.Idempotency = &idem
	}
	if c.Lookup != nil {
		lookup := *c.Lookup
		c.Lookup = &lookup
	}
	if c.Auth != nil {
		auth := *c.Auth
		c.Auth = &auth
	}
	if c.Webhook != nil {
		w := *c.Webhook
		w.Signature = cmp.Or(w.Signature, DefaultSignature)
		c.Webhook = &w
	}
	if c.Reconcile != nil {
		c.Reconcile = c.Reconcile.withDefaults()
	}
	c.Headers = maps.Clone(c.Headers)
	c.Evidence.Keep = slices.Clone(c.Evidence.Keep)
	c.Outcomes = slices.Clone(c.Outcomes)
	c.Retry.MaxAttempts = cmp.Or(c.Retry.MaxAttempts, DefaultMaxAttempts)
	c.Retry.Initial = orDuration(c.Retry.Initial, DefaultRetryInitial)
	c.Retry.Max = orDuration(c.Retry.Max, DefaultRetryMax)
	c.Retry.MaxElapsed = orDuration(c.Retry.MaxElapsed, DefaultRetryMaxElapsed)
	c.Breaker.Failures = cmp.Or(c.Breaker.Failures, DefaultBreakerFailures)
	c.Breaker.Cooldown = orDuration(c.Breaker.Cooldown, DefaultBreakerCooldown)
	c.Review.Owner = cmp.Or(c.Review.Owner, DefaultReviewOwner)
	c.Review.Deadline = orDuration(c.Review.Deadline, DefaultReviewDeadline)
	return c
}

func orDuration(d Duration, def time.Duration) Duration {
	return Duration{cmp.Or(d.Duration, def)}
}

// validate reports every problem of a defaults-filled config, each naming its field.
func (c *Config) validate() []*FieldError {
	var errs []*FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Provider: c.Name, Field: field, Err: fmt.Errorf(format, args...)})
	}
	if !providerNamePattern.MatchString(c.Name) {
		bad("name", "must match %s (it is used as a NATS subject token and a URL path segment)", providerNamePattern)
	}
	if c.BaseURL == "" {
		bad("base_url", "is required")
	} else if u, err := url.Parse(c.BaseURL); err != nil {
		bad("base_url", "is not a URL: %w", err)
	} else if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		bad("base_url", "must be an absolute http or https URL, got %q", c.BaseURL)
	} else if u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(c.BaseURL, "?") {
		bad("base_url", "must not have a query or fragment; put them in the paths")
	}
	if c.Timeout.Duration < 0 {
		bad("timeout", "must not be negative")
	}
	switch c.Create.Method {
	case "POST", "PUT", "PATCH":
	default:
		bad("create.method", "must be POST, PUT or PATCH, got %q", c.Create.Method)
	}
	switch {
	case c.Create.Path == "":
		bad("create.path", "is required")
	case !strings.HasPrefix(c.Create.Path, "/"):
		bad("create.path", "must start with \"/\", got %q", c.Create.Path)
	}
	if c.Idempotency != nil {
		switch {
		case c.Idempotency.Header == "":
			bad("idempotency.header", "is required when idempotency is given (omit idempotency if the provider ignores keys)")
		case !headerNamePattern.MatchString(c.Idempotency.Header):
			bad("idempotency.header", "%q is not a valid HTTP header name", c.Idempotency.Header)
		}
		switch {
		case c.Idempotency.Retention.Duration < 0:
			bad("idempotency.retention", "must not be negative")
		case c.Idempotency.Retention.Duration == 0:
			bad("idempotency.retention", "is required: a resend under the key is only safe inside the provider's retention window")
		}
	}
	if c.Lookup != nil {
		switch {
		case c.Lookup.Path == "":
			bad("lookup.path", "is required when lookup is given")
		case !strings.HasPrefix(c.Lookup.Path, "/"):
			bad("lookup.path", "must start with \"/\", got %q", c.Lookup.Path)
		case !strings.Contains(c.Lookup.Path, ReferencePlaceholder):
			bad("lookup.path", "must contain %s, got %q", ReferencePlaceholder, c.Lookup.Path)
		}
		if c.Lookup.VisibilityLag.Duration < 0 {
			bad("lookup.visibility_lag", "must not be negative")
		}
	}
	if c.WebhookSecretEnv != "" && !envNamePattern.MatchString(c.WebhookSecretEnv) {
		bad("webhook_secret_env", "%q is not an environment variable name (give the variable's name, never the secret)", c.WebhookSecretEnv)
	}
	if c.WebhookSecretEnv != "" && c.Tenant == "" {
		bad("tenant", "is required for a provider that sends webhooks (webhook_secret_env is set): evidence that matches no operation belongs to this tenant, and is never shown to other tenants")
	}
	if c.Retry.MaxAttempts < 1 {
		bad("retry.max_attempts", "must be at least 1, got %d", c.Retry.MaxAttempts)
	}
	if c.Breaker.Failures < 1 {
		bad("breaker.failures", "must be at least 1, got %d", c.Breaker.Failures)
	}
	if c.Breaker.Cooldown.Duration > MaxBreakerCooldown {
		bad("breaker.cooldown", "must be at most %s, got %s", MaxBreakerCooldown, c.Breaker.Cooldown)
	}
	for _, d := range []struct {
		field string
		value Duration
	}{
		{"retry.initial", c.Retry.Initial},
		{"retry.max", c.Retry.Max},
		{"retry.max_elapsed", c.Retry.MaxElapsed},
		{"review.deadline", c.Review.Deadline},
		{"breaker.cooldown", c.Breaker.Cooldown},
	} {
		if d.value.Duration < 0 {
			bad(d.field, "must not be negative")
		}
	}
	if c.Reconcile != nil {
		errs = append(errs, c.Reconcile.validate(c)...)
	}
	if c.Retry.Initial.Duration > c.Retry.Max.Duration {
		bad("retry.initial", "(%s) must not exceed retry.max (%s)", c.Retry.Initial, c.Retry.Max)
	}
	return errs
}

// FieldError is one problem in a providers config, naming where it is so that an operator can fix
// the file without guessing. Parse and NewRegistry return these joined with errors.Join, beside
// an *action.FieldError for each problem in an action.
type FieldError struct {
	// Provider is the provider's name, for a problem in one.
	Provider string
	// Notification is the receiver's name under notifications, for a
	// problem in one.
	Notification string
	// Field is the YAML key path inside the provider or receiver, e.g. "retry.initial".
	Field string
	// Err says what is wrong.
	Err error
}

// Error formats as `provider "acme": retry.initial: must not be negative`.
func (e *FieldError) Error() string {
	if e.Notification != "" {
		return fmt.Sprintf("notification %q: %s: %v", e.Notification, e.Field, e.Err)
	}
	return fmt.Sprintf("provider %q: %s: %v", e.Provider, e.Field, e.Err)
}

// Unwrap exposes the underlying cause (e.g. a duration parse error).
func (e *FieldError) Unwrap() error { return e.Err }
