package main

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testdb"
)

// drillFile writes demo/providers.yaml pointed at a demo supplier of the test's own (mode) and
// returns the file, the supplier and an environment holding the file's secret.
func drillFile(t *testing.T, mode mocksupplier.Mode, edit func(string) string) (string, *mocksupplier.Server) {
	t.Helper()
	s := mocksupplier.New(mocksupplier.Config{Idempotency: mode, LookupLag: 2e9})
	srv := httptest.NewServer(s)
	t.Cleanup(func() { srv.Close(); s.Close() })
	raw, err := os.ReadFile("../../demo/providers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(raw), "http://127.0.0.1:9100", srv.URL, 1)
	if edit != nil {
		text = edit(text)
	}
	path := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, s
}

// drillRun runs `actledger drill` with args, DATABASE_URL set to a server that does not answer
// (a drill must never read it).
func drillRun(t *testing.T, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	env := map[string]string{"ACME_WEBHOOK_SECRET": "whsec_drill", "DATABASE_URL": "postgres://127.0.0.1:1/production?sslmode=disable&connect_timeout=1"}
	var out, errOut bytes.Buffer
	status = exitStatus(run(t.Context(), append([]string{"drill"}, args...), func(k string) string { return env[k] }, &out, &errOut), &errOut)
	return status, out.String(), errOut.String()
}

type drillJSON struct {
	Action, Provider string
	Passed           bool
	Scenarios        []struct {
		Name     string
		Passed   *bool
		Effects  *int
		State    string
		Summary  string
		Review   []string
		AccessOK bool `json:"access_ok"`
		Seconds  float64
		Why      string
	}
	Effects []struct {
		Scenario, Reference string
		ProviderReference   *string `json:"provider_reference"`
	}
}

// TestDrillsOnPrivateLedgersPassWriteBothReportsAndExitZeroTwoAtOnce runs two drills at once
// on one machine, each on a private Postgres and JetStream of its own.
func TestDrillsOnPrivateLedgersPassWriteBothReportsAndExitZeroTwoAtOnce(t *testing.T) {
	t.Parallel()
	type result struct {
		status         int
		stdout, stderr string
		md, js         string
		supplier       *mocksupplier.Server
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i := range results {
		file, supplier := drillFile(t, mocksupplier.Honour, nil)
		dir := t.TempDir()
		r := &results[i]
		r.md, r.js, r.supplier = filepath.Join(dir, "drill.md"), filepath.Join(dir, "drill.json"), supplier
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.status, r.stdout, r.stderr = drillRun(t, "supplier.create_order", "--params", `{"sku":"A-1","qty":3}`, "--providers", file,
				"--only", "lost_response,changed_params", "--report", r.md, "--json", r.js)
		}()
	}
	wg.Wait()
	for _, r := range results {
		checkPrivateDrill(t, r.status, r.stdout, r.stderr, r.md, r.js, r.supplier)
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "actledger-drill-*")); len(left) > 0 {
		t.Logf("temporary directories of drills present (perhaps other tests' drills): %v", left)
	}
}

func checkPrivateDrill(t *testing.T, status int, stdout, stderr, md, js string, supplier *mocksupplier.Server) {
	t.Helper()
	if status != 0 {
		t.Fatalf("exit %d; stderr:\n%s", status, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing (the report went to --report)", stdout)
	}
	for _, want := range []string{"drill: lost_response: the supplier commits", "drill: lost_response: passed", "private Postgres", "drill: passed: 2 scenarios"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not show progress %q:\n%s", want, stderr)
		}
	}
	raw, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var got drillJSON
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, raw)
	}
	if !got.Passed || got.Action != "supplier.create_order" || got.Provider != "acme" || len(got.Scenarios) != 2 {
		t.Errorf("JSON report %s", raw)
	}
	for _, e := range got.Effects {
		if supplier.Orders(e.Reference) != 1 || e.ProviderReference == nil {
			t.Errorf("effect %+v: %d orders at the supplier", e, supplier.Orders(e.Reference))
		}
	}
	text, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "# Drill: `supplier.create_order` on provider `acme`") || !strings.Contains(string(text), "**passed**") {
		t.Errorf("Markdown report:\n%s", text)
	}
}

func TestDrillExitsOneAndSaysWhichScenarioAndWhyWhenTheSupplierIgnoresKeys(t *testing.T) {
	t.Parallel()
	file, _ := drillFile(t, mocksupplier.Ignore, nil)
	_, dbURL := testdb.NewWithURL(t)
	js := filepath.Join(t.TempDir(), "drill.json")
	status, stdout, stderr := drillRun(t, "supplier.create_order", "--params", `{"sku":"A-1","qty":3}`, "--providers", file,
		"--only", "error_after_commit", "--json", js, "--database-url", dbURL)
	if status != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", status, stderr)
	}
	if !strings.Contains(stdout, "## error_after_commit: FAILED") || !strings.Contains(stdout, "**Why**: the supplier holds 2 effects") {
		t.Errorf("the Markdown on stdout does not say which scenario failed and why:\n%s", stdout)
	}
	if !strings.Contains(stderr, "drill: error_after_commit: FAILED: the supplier holds 2 effects") || !strings.Contains(stderr, "1 failed, 0 not established, of 1 scenarios") {
		t.Errorf("stderr:\n%s", stderr)
	}
	raw, _ := os.ReadFile(js)
	var got drillJSON
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Passed || len(got.Scenarios) != 1 || got.Scenarios[0].Passed == nil || *got.Scenarios[0].Passed ||
		got.Scenarios[0].Effects == nil || *got.Scenarios[0].Effects != 2 || got.Scenarios[0].Why == "" {
		t.Errorf("JSON report %s", raw)
	}
}

func TestDrillRefusesBeforeSendingAnything(t *testing.T) {
	t.Parallel()
	production, prodSupplier := drillFile(t, mocksupplier.Honour, func(s string) string {
		return strings.Replace(s, "environment: test", "environment: production", 1)
	})
	file, supplier := drillFile(t, mocksupplier.Honour, nil)
	for _, c := range []struct {
		name   string
		args   []string
		status int
		says   string
	}{
		{"a production provider", []string{"supplier.create_order", "--params", `{"sku":"A-1"}`, "--providers", production}, 2, "environment production"},
		{"an unknown action", []string{"supplier.cancel_order", "--params", `{"sku":"A-1"}`, "--providers", file}, 2, `no action "supplier.cancel_order"`},
		{"params the action refuses", []string{"supplier.create_order", "--params", `{"qty":0}`, "--providers", file}, 2, "refuses these params"},
		{"params that are no object", []string{"supplier.create_order", "--params", `[1]`, "--providers", file}, 2, "JSON object"},
		{"an unknown scenario", []string{"supplier.create_order", "--params", `{"sku":"A-1"}`, "--providers", file, "--only", "lost_answer"}, 2, `no scenario "lost_answer"`},
		{"no params", []string{"supplier.create_order", "--providers", file}, 2, "--params JSON is required"},
		{"no action", []string{"--params", `{"sku":"A-1"}`, "--providers", file}, 2, "one ACTION"},
		{"no providers file", []string{"supplier.create_order", "--params", `{"sku":"A-1"}`}, 2, "--providers"},
	} {
		status, _, stderr := drillRun(t, c.args...)
		if status != c.status || !strings.Contains(stderr, c.says) {
			t.Errorf("%s: exit %d, stderr %q; want %d saying %q", c.name, status, stderr, c.status, c.says)
		}
	}
	if n := prodSupplier.TotalOrders() + supplier.TotalOrders(); n != 0 {
		t.Errorf("%d orders at the suppliers, want none", n)
	}
}

func TestDrillOfASupplierThatIsDownSaysSoAndExitsOne(t *testing.T) {
	t.Parallel()
	file, _ := drillFile(t, mocksupplier.Honour, func(s string) string {
		return regexp.MustCompile(`base_url: http://127\.0\.0\.1:\d+`).ReplaceAllString(s, "base_url: http://127.0.0.1:1")
	})
	status, _, stderr := drillRun(t, "supplier.create_order", "--params", `{"sku":"A-1"}`, "--providers", file)
	if status != 1 || !strings.Contains(stderr, "does not answer") || !strings.Contains(stderr, "nothing was sent") {
		t.Errorf("exit %d, stderr %q", status, stderr)
	}
}
