package drill_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/drill"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/provider"
)

// demoLag is the demo supplier's lookup lag in these tests, and what its providers file declares
// as visibility_lag: the file's contract matches the supplier's behaviour.
const demoLag = 500 * time.Millisecond

// demoFile is demo/providers.yaml, the file `make run` serves, pointed at url, with its lag
// shortened to demoLag; edit changes it further.
func demoFile(t *testing.T, url string, edit ...func(string) string) *provider.Registry {
	t.Helper()
	raw, err := os.ReadFile("../demo/providers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(raw), "http://127.0.0.1:9100", url, 1)
	text = strings.Replace(text, "visibility_lag: 2s", "visibility_lag: "+demoLag.String(), 1)
	for _, e := range edit {
		text = e(text)
	}
	reg, err := provider.ParseEnv([]byte(text), func(string) string { return "whsec_drill" })
	if err != nil {
		t.Fatalf("providers file: %v", err)
	}
	return reg
}

// demoSupplier serves the demo supplier on a loopback port.
func demoSupplier(t *testing.T, mode mocksupplier.Mode) (*mocksupplier.Server, string) {
	t.Helper()
	s := mocksupplier.New(mocksupplier.Config{Idempotency: mode, LookupLag: demoLag})
	srv := httptest.NewServer(s)
	t.Cleanup(func() { srv.Close(); s.Close() })
	return s, srv.URL
}

// run runs a drill on a fresh database of the test's own.
func run(t *testing.T, opts drill.Options) (*drill.Report, string) {
	t.Helper()
	_, url := testdb.NewWithURL(t)
	opts.DatabaseURL = url
	if opts.Action == "" {
		opts.Action = "supplier.create_order"
	}
	if opts.Params == nil {
		opts.Params = json.RawMessage(`{"sku":"A-1","qty":3}`)
	}
	var progress bytes.Buffer
	opts.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	report, err := drill.Run(ctx, opts)
	t.Logf("drill took %s; progress:\n%s", time.Since(start).Round(100*time.Millisecond), progress.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var md strings.Builder
	if err := report.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	return report, md.String()
}

func TestEveryScenarioPassesAgainstTheDemoSupplierAndCountsMatchItsOrders(t *testing.T) {
	t.Parallel()
	supplier, url := demoSupplier(t, mocksupplier.Honour)
	report, md := run(t, drill.Options{Registry: demoFile(t, url)})
	t.Log(md)
	if !report.Passed {
		t.Errorf("report did not pass:\n%s", md)
	}
	if got, want := len(report.Scenarios), len(drill.Scenarios); got != want {
		t.Errorf("%d scenarios ran, want %d", got, want)
	}
	for _, s := range report.Scenarios {
		if s.Passed == nil || !*s.Passed {
			t.Errorf("%s: passed %v, why %q", s.Name, s.Passed, s.Why)
		}
		if !s.AccessOK {
			t.Errorf("%s: another tenant's or scope's token saw the operation", s.Name)
		}
	}
	// The drill's counts are the supplier's: every effect it lists is an order there, once.
	perRef := map[string]int{}
	for _, e := range report.Effects {
		perRef[e.Reference]++
	}
	for ref, n := range perRef {
		if got := supplier.Orders(ref); got != n {
			t.Errorf("reference %s: the report lists %d effects, the supplier holds %d orders", ref, n, got)
		}
	}
	if got := supplier.TotalOrders(); got != len(report.Effects) {
		t.Errorf("the supplier holds %d orders, the report lists %d effects", got, len(report.Effects))
	}
}
