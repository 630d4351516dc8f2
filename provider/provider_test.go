package provider

import (
	"context"
	"testing"
)

// fake is a Provider that calls nothing.
type fake struct{}

func (fake) Create(context.Context, CreateRequest) Result { return Result{} }
func (fake) Lookup(context.Context, string) LookupResult  { return LookupResult{} }

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
