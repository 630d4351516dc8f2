package provider

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/action"
)

// productExample is the providers config of the product contract, with the
// tenant that the v2 hardening requires of a provider that sends webhooks
// (docs/contract.md holds it with an action contract; see
// TestContractDocExampleParses).
const productExample = `providers:
  acme:
    base_url: http://127.0.0.1:9100
    account: acct_123                   # recorded on every attempt, with the environment, so a
    environment: test                   # lookup in the wrong account/environment is never trusted
    timeout: 2s
    create: {method: POST, path: /v1/orders}
    reference_param: client_reference   # body field that carries the external key
    reference_field: id                 # response field that carries the provider's reference
    idempotency: {header: Idempotency-Key, retention: 24h}   # omit: provider ignores keys
    lookup: {path: "/v1/orders?client_reference={reference}", visibility_lag: 2s}  # omit: no lookup
    webhook_secret_env: ACME_WEBHOOK_SECRET
    tenant: acme-corp                   # owns evidence that matches no operation
    retry: {max_attempts: 5, initial: 100ms, max: 5s, max_elapsed: 60s}
    review: {owner: supply-ops, deadline: 4h}
actions:
  supplier.create_order: {provider: acme}
`

func mustParse(t *testing.T, doc string) *Registry {
	t.Helper()
	reg, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return reg
}

func d(v time.Duration) Duration { return Duration{v} }

func TestParseAcceptsTheProductContractExample(t *testing.T) {
	t.Parallel()
	reg := mustParse(t, productExample)

	got, ok := reg.ForAction("supplier.create_order")
	if !ok {
		t.Fatal("ForAction(supplier.create_order) not found")
	}
	want := &Config{
		Name:             "acme",
		BaseURL:          "http://127.0.0.1:9100",
		Account:          "acct_123",
		Environment:      "test",
		Timeout:          d(2 * time.Second),
		Create:           Endpoint{Method: "POST", Path: "/v1/orders"},
		ReferenceParam:   "client_reference",
		ReferenceField:   "id",
		Idempotency:      &Idempotency{Header: "Idempotency-Key", Retention: d(24 * time.Hour)},
		Lookup:           &Lookup{Path: "/v1/orders?client_reference={reference}", VisibilityLag: d(2 * time.Second)},
		WebhookSecretEnv: "ACME_WEBHOOK_SECRET",
		Tenant:           "acme-corp",
		Retry:            RetryPolicy{MaxAttempts: 5, Initial: d(100 * time.Millisecond), Max: d(5 * time.Second), MaxElapsed: d(60 * time.Second)},
		Review:           ReviewPolicy{Owner: "supply-ops", Deadline: d(4 * time.Hour)},
		Breaker:          BreakerPolicy{Failures: 5, Cooldown: d(10 * time.Second)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config mismatch\n got: %+v\nwant: %+v", got, want)
	}
	if byName, ok := reg.Provider("acme"); !ok || byName != got {
		t.Errorf("Provider(acme) = %p, %v; want the same config as ForAction", byName, ok)
	}
	if _, ok := reg.ForAction("supplier.cancel_order"); ok {
		t.Error("ForAction of an unknown action reported ok")
	}
	if _, ok := reg.Provider("nope"); ok {
		t.Error("Provider of an unknown name reported ok")
	}
}

func TestParseAcceptsTheJSONForm(t *testing.T) {
	t.Parallel()
	const doc = `{
	  "providers": {
	    "acme": {
	      "base_url": "https://api.acme.example",
	      "timeout": "2s",
	      "create": {"path": "/v1/orders"},
	      "idempotency": {"header": "Idempotency-Key", "retention": "24h"},
	      "lookup": {"path": "/v1/orders/{reference}"}
	    }
	  },
	  "actions": {"supplier.create_order": {"provider": "acme"}}
	}`
	reg := mustParse(t, doc)
	cfg, ok := reg.ForAction("supplier.create_order")
	if !ok {
		t.Fatal("action not found")
	}
	if got, want := cfg.Timeout.Duration, 2*time.Second; got != want {
		t.Errorf("Timeout = %v, want %v", got, want)
	}
	if got, want := cfg.Idempotency.Retention.Duration, 24*time.Hour; got != want {
		t.Errorf("Retention = %v, want %v", got, want)
	}
	if got, want := cfg.Lookup.Path, "/v1/orders/{reference}"; got != want {
		t.Errorf("Lookup.Path = %q, want %q", got, want)
	}
}

func TestParseFillsDocumentedDefaults(t *testing.T) {
	t.Parallel()
	reg := mustParse(t, `
providers:
  acme: {base_url: "http://x.example", create: {path: /orders}}
actions: {a: {provider: acme}}
`)
	got, _ := reg.Provider("acme")
	want := &Config{
		Name:             "acme",
		BaseURL:          "http://x.example",
		Timeout:          d(DefaultTimeout),
		timeoutDefaulted: true,
		Create:           Endpoint{Method: "POST", Path: "/orders"},
		ReferenceParam:   "reference",
		ReferenceField:   "id",
		Retry:            RetryPolicy{MaxAttempts: 5, Initial: d(100 * time.Millisecond), Max: d(5 * time.Second), MaxElapsed: d(60 * time.Second)},
		Review:           ReviewPolicy{Owner: "operations", Deadline: d(4 * time.Hour)},
		Breaker:          BreakerPolicy{Failures: DefaultBreakerFailures, Cooldown: d(DefaultBreakerCooldown)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults mismatch\n got: %+v\nwant: %+v", got, want)
	}
}

// providerDoc is a minimal valid provider named name plus extra lines (one faulty line per test).
func providerDoc(name string, extra ...string) string {
	var b strings.Builder
	b.WriteString("providers:\n  " + name + ":\n")
	b.WriteString("    create: {path: /orders}\n")
	hasBase := false
	for _, line := range extra {
		if strings.HasPrefix(line, "base_url:") {
			hasBase = true
		}
		b.WriteString("    " + line + "\n")
	}
	if !hasBase {
		b.WriteString("    base_url: http://x.example\n")
	}
	return b.String()
}

func TestParseRejectsInvalidConfigNamingTheField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		want []string // substrings of the error
	}{
		{"missing base_url", "providers:\n  acme: {create: {path: /o}}\n", []string{`provider "acme": base_url: is required`}},
		{"base_url not a URL", providerDoc("acme", "base_url: \"http://[::1\""), []string{`provider "acme": base_url: is not a URL`}},
		{"base_url not http", providerDoc("acme", "base_url: ftp://x.example"), []string{`base_url: must be an absolute http or https URL`}},
		{"base_url relative", providerDoc("acme", "base_url: /v1"), []string{`base_url: must be an absolute http or https URL`}},
		{"base_url with query", providerDoc("acme", "base_url: http://x.example/?token=1"), []string{`base_url: must not have a query`}},
		{"uppercase provider name", providerDoc("Acme"), []string{`provider "Acme": name: must match`}},
		{"provider name with dot", providerDoc("ac.me"), []string{`provider "ac.me": name: must match`}},
		{"provider name with wildcard", providerDoc("acme*"), []string{`provider "acme*": name: must match`}},
		{"action with unknown provider", providerDoc("acme") + "actions: {a: {provider: acne}}\n", []string{`action "a": provider: "acne" is not defined under providers`}},
		{"action without provider", providerDoc("acme") + "actions: {a: {}}\n", []string{`action "a": provider: is required`}},
		{"action name with space", providerDoc("acme") + "actions: {\"a b\": {provider: acme}}\n", []string{`action "a b": name:`}},
		{"missing create path", "providers:\n  acme: {base_url: http://x.example}\n", []string{`provider "acme": create.path: is required`}},
		{"create path without slash", "providers:\n  acme: {base_url: http://x.example, create: {path: orders}}\n", []string{`create.path: must start with "/"`}},
		{"create method GET", "providers:\n  acme: {base_url: http://x.example, create: {method: GET, path: /o}}\n", []string{`create.method: must be POST, PUT or PATCH`}},
		{"lookup without placeholder", providerDoc("acme", "lookup: {path: /orders}"), []string{`provider "acme": lookup.path: must contain {reference}`}},
		{"lookup without path", providerDoc("acme", "lookup: {visibility_lag: 1s}"), []string{`lookup.path: is required`}},
		{"negative timeout", providerDoc("acme", "timeout: -1s"), []string{`provider "acme": timeout: must not be negative`}},
		{"zero timeout", providerDoc("acme", "timeout: 0s"), []string{`provider "acme": timeout: must be positive`}},
		{"negative visibility lag", providerDoc("acme", "lookup: {path: '/o/{reference}', visibility_lag: -2s}"), []string{`lookup.visibility_lag: must not be negative`}},
		{"negative retry initial", providerDoc("acme", "retry: {initial: -1ms}"), []string{`retry.initial: must not be negative`}},
		{"negative review deadline", providerDoc("acme", "review: {deadline: -4h}"), []string{`review.deadline: must not be negative`}},
		{"negative retention", providerDoc("acme", "idempotency: {header: Idempotency-Key, retention: -1h}"), []string{`idempotency.retention: must not be negative`}},
		{"max_attempts zero", providerDoc("acme", "retry: {max_attempts: 0}"), []string{`retry.max_attempts: must be at least 1, got 0`}},
		{"max_attempts negative", providerDoc("acme", "retry: {max_attempts: -3}"), []string{`retry.max_attempts: must be at least 1, got -3`}},
		{"initial above max", providerDoc("acme", "retry: {initial: 10s, max: 1s}"), []string{`retry.initial: (10s) must not exceed retry.max (1s)`}},
		{"idempotency without header", providerDoc("acme", "idempotency: {retention: 24h}"), []string{`provider "acme": idempotency.header: is required`}},
		{"idempotency header with space", providerDoc("acme", "idempotency: {header: 'Idem Key', retention: 24h}"), []string{`idempotency.header: "Idem Key" is not a valid HTTP header name`}},
		{"idempotency without retention", providerDoc("acme", "idempotency: {header: Idempotency-Key}"), []string{`idempotency.retention: is required`}},
		{"webhook secret in place of env name", providerDoc("acme", "webhook_secret_env: 'whsec_abc=='", "tenant: t"), []string{`webhook_secret_env: "whsec_abc==" is not an environment variable name`}},
		{"webhooks without a tenant", providerDoc("acme", "webhook_secret_env: ACME_WEBHOOK_SECRET"), []string{`provider "acme": tenant: is required for a provider that sends webhooks`}},
		{"garbage duration", providerDoc("acme", "timeout: soon"), []string{`provider "acme": timeout: invalid duration "soon"`}},
		{"bare number duration", providerDoc("acme", "retry: {max_elapsed: 60}"), []string{`provider "acme": retry.max_elapsed: invalid duration "60"`}},
		{"unknown field", providerDoc("acme", "idempotency_key: Idempotency-Key"), []string{`field idempotency_key not found`}},
		{"unknown top-level field", "provider: {}\n", []string{`field provider not found`}},
		{"empty document", "# nothing\n", []string{`empty document`}},
		{"two documents", providerDoc("acme") + "---\n" + providerDoc("acme"), []string{`more than one YAML document`}},
		{"duplicate provider", providerDoc("acme") + "  acme: {}\n", []string{`already defined`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reg, err := Parse([]byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse succeeded (%v), want an error containing %q\ndoc:\n%s", reg, tt.want, tt.doc)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseReportsAllProblemsAtOnceEachOnlyOnce(t *testing.T) {
	t.Parallel()
	const doc = `
providers:
  acme:
    base_url: ftp://x
    timeout: fast
    create: {path: orders}
    idempotency: {header: Idempotency-Key, retention: forever}
  Bad: {base_url: http://x.example, create: {path: /o}}
actions:
  a: {provider: missing}
`
	_, err := Parse([]byte(doc))
	if err == nil {
		t.Fatal("Parse succeeded, want errors")
	}
	wants := []string{
		`provider "acme": base_url:`,
		`provider "acme": timeout: invalid duration "fast"`,
		`provider "acme": create.path:`,
		`provider "acme": idempotency.retention: invalid duration "forever"`,
		`provider "Bad": name:`,
		`action "a": provider: "missing" is not defined`,
	}
	msg := err.Error()
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Errorf("error does not contain %q; got:\n%s", w, msg)
		}
	}
	// A value that failed to convert is not reported a second time by validation.
	if got := strings.Count(msg, "idempotency.retention"); got != 1 {
		t.Errorf("idempotency.retention reported %d times, want 1:\n%s", got, msg)
	}
	if got, want := len(strings.Split(msg, "\n")), len(wants); got != want {
		t.Errorf("got %d error lines, want %d:\n%s", got, want, msg)
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Errorf("errors.As(*FieldError) failed for %T", err)
	}
}

func TestDurationParsesGoDurationStringsAndRejectsGarbage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"100ms", 100 * time.Millisecond, false},
		{"2s", 2 * time.Second, false},
		{"24h", 24 * time.Hour, false},
		{"1h30m", 90 * time.Minute, false},
		{" 5s ", 5 * time.Second, false},
		{"2", 0, true},
		{"two seconds", 0, true},
		{"", 0, true},
		{"1d", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			var got Duration
			err := got.UnmarshalText([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("UnmarshalText(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if got.Duration != tt.want {
				t.Errorf("UnmarshalText(%q) = %v, want %v", tt.in, got.Duration, tt.want)
			}
			if err != nil && !strings.Contains(err.Error(), `want e.g.`) {
				t.Errorf("error %q does not say what is accepted", err)
			}
		})
	}
	text, err := Duration{1500 * time.Millisecond}.MarshalText()
	if err != nil || string(text) != "1.5s" {
		t.Errorf("MarshalText = %q, %v; want 1.5s", text, err)
	}
}

func TestRegistryListsActionsAndProvidersSorted(t *testing.T) {
	t.Parallel()
	reg := mustParse(t, `
providers:
  zeta: {base_url: http://z.example, create: {path: /o}}
  acme: {base_url: http://a.example, create: {path: /o}}
  mid_1: {base_url: http://m.example, create: {path: /o}}
actions:
  z.do: {provider: zeta}
  a.do: {provider: acme}
  m.do: {provider: mid_1}
  a.also: {provider: acme}
`)
	if got, want := reg.Actions(), []string{"a.also", "a.do", "m.do", "z.do"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Actions() = %v, want %v", got, want)
	}
	var names []string
	for _, c := range reg.Providers() {
		names = append(names, c.Name)
	}
	if want := []string{"acme", "mid_1", "zeta"}; !reflect.DeepEqual(names, want) {
		t.Errorf("Providers() names = %v, want %v", names, want)
	}
}

func TestNewRegistryKeepsItsOwnCopy(t *testing.T) {
	t.Parallel()
	f := File{
		Providers: map[string]Config{"acme": {
			BaseURL:     "http://x.example",
			Create:      Endpoint{Path: "/o"},
			Idempotency: &Idempotency{Header: "Idempotency-Key", Retention: d(time.Hour)},
		}},
		Actions: map[string]action.Contract{"a": {Provider: "acme"}},
	}
	reg, err := NewRegistry(f)
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	f.Providers["acme"].Idempotency.Header = "X-Changed"
	cfg, _ := reg.ForAction("a")
	if got, want := cfg.Idempotency.Header, "Idempotency-Key"; got != want {
		t.Errorf("Idempotency.Header = %q after changing the File, want %q", got, want)
	}
	if got, want := cfg.Name, "acme"; got != want {
		t.Errorf("Name = %q, want %q (from the map key)", got, want)
	}
}

func TestLoadReadsTheFileAndNamesItInErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "providers.yaml")
	if err := os.WriteFile(good, []byte(productExample), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(good); err != nil {
		t.Errorf("Load(%s): %v", good, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("providers: {acme: {}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("Load(bad) error = %v, want it to name %s", err, bad)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) error = %v, want os.ErrNotExist", err)
	}
}

func TestWebhookSecretsSplitsCommaSeparatedRotation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  string
		val  string
		want [][]byte
	}{
		{"one secret", "S", "whsec_a", [][]byte{[]byte("whsec_a")}},
		{"rotation", "S", " whsec_new , whsec_old ", [][]byte{[]byte("whsec_new"), []byte("whsec_old")}},
		{"empty entries ignored", "S", ",whsec_a,, ,", [][]byte{[]byte("whsec_a")}},
		{"unset variable", "S", "", nil},
		{"no variable configured", "", "ignored", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := &Config{WebhookSecretEnv: tt.env}
			got := cfg.WebhookSecretsFrom(func(name string) string {
				if name == "S" {
					return tt.val
				}
				return ""
			})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("WebhookSecretsFrom = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIdempotencyIsValidOnlyInsideRetention(t *testing.T) {
	t.Parallel()
	first := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	withIdem := &Config{Idempotency: &Idempotency{Header: "Idempotency-Key", Retention: d(24 * time.Hour)}}
	tests := []struct {
		name  string
		cfg   *Config
		first time.Time
		now   time.Time
		want  bool
	}{
		{"just sent", withIdem, first, first, true},
		{"inside retention", withIdem, first, first.Add(23 * time.Hour), true},
		{"at retention", withIdem, first, first.Add(24 * time.Hour), false},
		{"past retention", withIdem, first, first.Add(25 * time.Hour), false},
		{"never sent", withIdem, time.Time{}, first, false},
		{"provider ignores keys", &Config{}, first, first, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.cfg.IdempotencyValid(tt.first, tt.now); got != tt.want {
				t.Errorf("IdempotencyValid = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLookupBelievableAtAddsVisibilityLag(t *testing.T) {
	t.Parallel()
	last := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	cfg := &Config{Lookup: &Lookup{Path: "/o/{reference}", VisibilityLag: d(2 * time.Second)}}
	if got, want := cfg.LookupBelievableAt(last), last.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("LookupBelievableAt = %v, want %v", got, want)
	}
	if got := (&Config{}).LookupBelievableAt(last); !got.Equal(last) {
		t.Errorf("LookupBelievableAt without lookup = %v, want %v", got, last)
	}
}

func TestRetryPolicyDelayDoublesUpToMaxAndExhausts(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{MaxAttempts: 5, Initial: d(100 * time.Millisecond), Max: d(time.Second), MaxElapsed: d(time.Minute)}
	var got []time.Duration
	for attempt := 1; attempt <= 6; attempt++ {
		got = append(got, p.Delay(attempt))
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Delay(1..6) = %v, want %v", got, want)
	}
	if got := p.Delay(1 << 30); got != time.Second {
		t.Errorf("Delay(huge) = %v, want the cap", got)
	}
	first := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		attempts int
		now      time.Time
		want     bool
	}{
		{1, first, false},
		{4, first.Add(59 * time.Second), false},
		{5, first, true},
		{2, first.Add(time.Minute), true},
	}
	for _, tt := range tests {
		if got := p.Exhausted(tt.attempts, first, tt.now); got != tt.want {
			t.Errorf("Exhausted(%d, +%v) = %v, want %v", tt.attempts, tt.now.Sub(first), got, tt.want)
		}
	}
}

// TestDispatchTimeoutFitsTheLease: a call must end within its dispatch
// lease. A timeout left out is shortened to half a short lease instead of
// stopping the start; one set explicitly at or over the lease is refused
// with an error naming both.
func TestDispatchTimeoutFitsTheLease(t *testing.T) {
	t.Parallel()
	parsed := func(extra string) *Config {
		reg := mustParse(t, "providers:\n  acme: {base_url: \"http://x.example\", create: {path: /orders}"+extra+"}\nactions: {a: {provider: acme}}\n")
		cfg, _ := reg.Provider("acme")
		return cfg
	}
	tests := []struct {
		name    string
		cfg     *Config
		lease   time.Duration
		want    time.Duration
		wantErr string // the error names both durations
	}{
		{"left out, long lease: the default", parsed(""), 30 * time.Second, DefaultTimeout, ""},
		{"left out, lease of twice the default", parsed(""), 20 * time.Second, DefaultTimeout, ""},
		{"left out, short lease: half the lease", parsed(""), 5 * time.Second, 2500 * time.Millisecond, ""},
		{"left out, built in code", &Config{Name: "acme"}, 5 * time.Second, 2500 * time.Millisecond, ""},
		{"set under the lease", parsed(", timeout: 2s"), 5 * time.Second, 2 * time.Second, ""},
		{"set to the default under a short lease", parsed(", timeout: 10s"), 5 * time.Second, 0, "timeout: 10s must be shorter than LEASE_DURATION 5s"},
		{"set equal to the lease", parsed(", timeout: 5s"), 5 * time.Second, 0, "timeout: 5s must be shorter than LEASE_DURATION 5s"},
		{"left out, no time at all", parsed(""), time.Nanosecond, 0, "LEASE_DURATION 1ns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.cfg.DispatchTimeout(tt.lease)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("DispatchTimeout(%s) = %v", tt.lease, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), `provider "acme"`)):
				t.Fatalf("DispatchTimeout(%s) error = %v, want one naming provider \"acme\" and %q", tt.lease, err, tt.wantErr)
			case got != tt.want:
				t.Errorf("DispatchTimeout(%s) = %s, want %s", tt.lease, got, tt.want)
			}
		})
	}
}
