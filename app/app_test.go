package app_test

import (
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/app"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/startstop"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testnats"
	"github.com/actledger/actledger/provider"
)

const providersYAML = `providers:
  acme:
    base_url: http://127.0.0.1:9
    account: acct_test
    environment: test
    timeout: 1s
    create: {method: POST, path: /v1/orders}
    reference_param: client_reference
    reference_field: id
    review: {owner: supply-ops, deadline: 4h}
actions:
  supplier.create_order: {provider: acme}
`

func setup(t *testing.T, roles app.Roles) *app.App {
	t.Helper()
	reg, err := provider.Parse([]byte(providersYAML))
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Build(context.Background(), app.Config{
		Pool: testdb.New(t), Broker: testnats.New(t), Registry: reg, Roles: roles,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// serve used to return on a failed Start with the components started
// before it still running. A start that fails (here the dispatcher's, whose
// consumer cannot be created once the streams are gone) stops the relay
// started before it: the relay can be started again.
func TestFailedStartStopsTheRolesAlreadyStarted(t *testing.T) {
	t.Parallel()
	a := setup(t, app.Roles{Relay: true, Dispatcher: true, Reconciler: true})
	if err := a.Broker.DeleteStreams(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err == nil {
		t.Fatal("Start succeeded without streams")
	}
	err := a.Relay.Start(context.Background())
	if errors.Is(err, startstop.ErrStarted) {
		t.Fatal("the relay still runs after the dispatcher failed to start")
	}
	if err != nil {
		t.Fatal(err)
	}
	a.Relay.Stop()
}

func TestBuildWiresOnlyTheRolesAsked(t *testing.T) {
	t.Parallel()
	a := setup(t, app.Roles{API: true})
	if a.Handler == nil || a.Relay != nil || len(a.Dispatchers) != 0 {
		t.Errorf("API only: handler %v, relay %v, %d dispatchers", a.Handler != nil, a.Relay != nil, len(a.Dispatchers))
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Stop()
	b := setup(t, app.Roles{Relay: true, Dispatcher: true})
	if b.Handler != nil || b.Relay == nil || len(b.Dispatchers) != app.DefaultDispatchers {
		t.Errorf("workers: handler %v, relay %v, %d dispatchers", b.Handler != nil, b.Relay != nil, len(b.Dispatchers))
	}
}

// A dispatcher role gets the lease sweeper that backs its dispatchers up,
// and Start starts it; a process without dispatchers runs none, unless
// its roles ask for one, and the demo's roles leave it out.
func TestTheDispatcherRoleRunsTheLeaseSweeper(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		roles   app.Roles
		sweeper bool
	}{
		{"dispatcher", app.Roles{Dispatcher: true}, true},
		{"every role of serve", app.Roles{API: true, Relay: true, Dispatcher: true, Reconciler: true}, true},
		{"api and relay", app.Roles{API: true, Relay: true}, false},
		{"reconciler", app.Roles{Reconciler: true}, false},
		{"sweeper without dispatchers", app.Roles{Relay: true, Sweeper: app.SweeperAlways}, true},
		{"dispatcher without sweeper", app.Roles{Dispatcher: true, Sweeper: app.SweeperNever}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.roles.RunsSweeper(); got != tt.sweeper {
				t.Errorf("RunsSweeper() = %v, want %v", got, tt.sweeper)
			}
			a := setup(t, tt.roles)
			if (a.Sweeper != nil) != tt.sweeper {
				t.Fatalf("built a sweeper: %v, want %v", a.Sweeper != nil, tt.sweeper)
			}
			if !tt.sweeper {
				return
			}
			if err := a.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer a.Stop()
			if err := a.Sweeper.Start(context.Background()); !errors.Is(err, startstop.ErrStarted) {
				t.Errorf("starting the sweeper again: %v, want %v (Start runs it)", err, startstop.ErrStarted)
			}
		})
	}
}

func TestBuildNamesTheMissingOrUnusableField(t *testing.T) {
	t.Parallel()
	reg, err := provider.Parse([]byte(providersYAML))
	if err != nil {
		t.Fatal(err)
	}
	pool := testdb.New(t)
	tests := []struct {
		name string
		cfg  app.Config
		want string
	}{
		{"no pool", app.Config{}, "Config.Pool"},
		{"no registry", app.Config{Pool: pool}, "Config.Registry"},
		{"a sweeper role out of range", app.Config{Pool: pool, Registry: reg, Roles: app.Roles{Sweeper: app.SweeperNever + 1}}, "Config.Roles.Sweeper"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := app.Build(context.Background(), tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Build: %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// Config.Auth reaches the token store: a TTL it refuses stops Build.
func TestBuildRefusesAnUnusableTokenCache(t *testing.T) {
	t.Parallel()
	reg, err := provider.Parse([]byte(providersYAML))
	if err != nil {
		t.Fatal(err)
	}
	_, err = app.Build(context.Background(), app.Config{
		Pool: testdb.New(t), Broker: testnats.New(t), Registry: reg,
		Auth: auth.Config{CacheTTL: auth.MaxCacheTTL + time.Second}, Logger: slog.New(slog.DiscardHandler),
	})
	if err == nil || !strings.Contains(err.Error(), "Config.CacheTTL") {
		t.Errorf("Build with a token cache TTL over the bound: %v, want an error naming Config.CacheTTL", err)
	}
}

// The wiring `actledger serve` runs links no test double: the mock
// supplier reaches the actledger binary only through `actledger demo`, and
// the fakes of real suppliers (mocksupplier/…) never. The one internal/test
// package it links is testsignal, on purpose: the components hold their
// test signals, which do nothing unless a test arms them.
func TestServeWiringDoesNotLinkTheMockSupplier(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/actledger/actledger/app").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	const mock = "github.com/actledger/actledger/mocksupplier"
	const signals = "github.com/actledger/actledger/internal/testsignal"
	for _, dep := range deps {
		if dep == mock || strings.HasPrefix(dep, mock+"/") || strings.HasPrefix(dep, "github.com/actledger/actledger/internal/test") && dep != signals {
			t.Errorf("app links %s", dep)
		}
	}
}
