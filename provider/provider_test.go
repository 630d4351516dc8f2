package provider

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"
)

// fake is a Provider that calls nothing.
type fake struct{}

func (fake) Create(context.Context, CreateRequest) Result       { return Result{} }
func (fake) Lookup(context.Context, LookupRequest) LookupResult { return LookupResult{} }

// TestOfPrefersTheOverrideElseCallsOverHTTP: the dispatcher and the
// reconciler pick a provider the same way, so an override (a fake, a fault
// injector) replaces both its creates and its lookups, and any other
// provider is called over HTTP with its own config.
func TestOfPrefersTheOverrideElseCallsOverHTTP(t *testing.T) {
	t.Parallel()
	acme, beta := &Config{Name: "acme"}, &Config{Name: "beta"}
	overrides := map[string]Provider{"acme": fake{}}
	if got := Of(acme, overrides, HTTPOptions{}); got != (fake{}) {
		t.Errorf("Of(acme) = %T, want the override", got)
	}
	if got, ok := Of(beta, overrides, HTTPOptions{}).(*HTTP); !ok || got.Config() != beta {
		t.Errorf("Of(beta) = %T, want an HTTP provider with beta's config", Of(beta, overrides, HTTPOptions{}))
	}
	if got, ok := Of(acme, nil, HTTPOptions{}).(*HTTP); !ok || got.Config() != acme {
		t.Errorf("Of(acme) without overrides = %T, want an HTTP provider with acme's config", Of(acme, nil, HTTPOptions{}))
	}
}

// TestLookupEvidenceKeepsWhatTheAnswerSaid: a lookup's evidence always
// says what was asked where and when, and adds each detail of the answer
// only when the answer had one, so an absence's event holds no empty
// reference or error.
func TestLookupEvidenceKeepsWhatTheAnswerSaid(t *testing.T) {
	t.Parallel()
	at := time.Unix(1700000000, 0)
	base := []string{"account", "at", "environment", "http_status", "lookup"}
	for _, tt := range []struct {
		name  string
		r     LookupResult
		extra []string
	}{
		{"absent", LookupResult{Status: LookupAbsent, HTTPStatus: 404, At: at, Account: "acct_1", Environment: "test"}, nil},
		{"found", LookupResult{Status: LookupFound, ProviderReference: "ord_1", Body: `{"id":"ord_1"}`, HTTPStatus: 200, At: at}, []string{"body", "provider_reference"}},
		{"duplicate", LookupResult{Status: LookupDuplicate, References: []string{"ord_1", "ord_2"}, HTTPStatus: 200, At: at}, []string{"references"}},
		{"error", LookupResult{Status: LookupError, Error: "lookup answered HTTP 503", HTTPStatus: 503, At: at}, []string{"error"}},
	} {
		e := tt.r.Evidence()
		got := slices.Sorted(maps.Keys(e))
		want := slices.Sorted(slices.Values(append(slices.Clone(base), tt.extra...)))
		if !slices.Equal(got, want) {
			t.Errorf("%s: evidence keys %v, want %v", tt.name, got, want)
		}
		if e["lookup"] != tt.r.Status || e["at"] != tt.r.At {
			t.Errorf("%s: evidence %v does not say the answer and its time", tt.name, e)
		}
	}
}
