package provider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAccessExamplesOfTheDocsLoad: the access: sections that
// docs/sign-in.md and the README show load as written, with their client
// secret's variable set, and admit whom they say.
func TestAccessExamplesOfTheDocsLoad(t *testing.T) {
	t.Parallel()
	for _, page := range []string{filepath.Join("..", "docs", "sign-in.md"), filepath.Join("..", "README.md")} {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		i := strings.Index(string(raw), "access:\n")
		if i < 0 {
			t.Fatalf("%s holds no access: example", page)
		}
		// The example is the yaml block's lines from access: on, at the
		// indentation access: has.
		start := strings.LastIndex(string(raw[:i]), "\n") + 1
		indent := string(raw[start:i])
		var lines []string
		for _, l := range strings.Split(string(raw[start:]), "\n") {
			if strings.TrimSpace(l) == "```" {
				break
			}
			lines = append(lines, strings.TrimPrefix(l, indent))
		}
		doc := providerDoc("acme") + strings.Join(lines, "\n") + "\n"
		reg, err := ParseEnv([]byte(doc), func(k string) string { return map[string]string{"OIDC_CLIENT_SECRET": "s3cret"}[k] })
		if err != nil {
			t.Fatalf("%s: %v\n%s", page, err, doc)
		}
		a := reg.Access()
		if a == nil || a.ClientSecret() != "s3cret" || len(a.Rules) == 0 {
			t.Fatalf("%s: access %+v, want the issuer, the secret read and its rules", page, a)
		}
		g, ok, _ := a.Match(map[string]any{"email": "ann@acme.example", "groups": []any{"purchasing-approvers"}})
		if !ok || g.Role != "approver" || g.Tenant != "acme-corp" {
			t.Errorf("%s: a purchasing approver gets %+v, %v; want an approver of acme-corp", page, g, ok)
		}
	}
}
