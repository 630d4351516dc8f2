package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/provider"
)

// TestServeWarnsOnceWhenAWebhookSecretIsPublishedInTheRepository: serve
// run with compose.yaml's demo secret (here beside a secret of its own,
// as during a rotation) says so at WARN, once, naming the variable and
// never the secret.
func TestServeWarnsOnceWhenAWebhookSecretIsPublishedInTheRepository(t *testing.T) {
	t.Parallel()
	in := prepareServe(t, nil)
	getenv := func(k string) string {
		if k == "ACME_WEBHOOK_SECRET" {
			return "a-secret-of-our-own, demo-webhook-secret"
		}
		return in.getenv(k)
	}
	var stderr lockedBuffer
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- run(ctx, []string{"serve"}, getenv, io.Discard, &stderr) }()
	waitReady(t, in.base, served)
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	var warnings []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "published in actledger's repository") {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "level=WARN") || !strings.Contains(warnings[0], "variable=ACME_WEBHOOK_SECRET") ||
		!strings.Contains(warnings[0], "providers=acme") {
		t.Fatalf("warnings %q, want one WARN naming ACME_WEBHOOK_SECRET and provider acme", warnings)
	}
	if strings.Contains(stderr.String(), "demo-webhook-secret") || strings.Contains(stderr.String(), "a-secret-of-our-own") {
		t.Errorf("serve's log holds a secret:\n%s", stderr.String())
	}
}

// TestAWebhookSecretOfOurOwnIsNotWarnedAbout: only the repository's
// secrets are warned about.
func TestAWebhookSecretOfOurOwnIsNotWarnedAbout(t *testing.T) {
	t.Parallel()
	registry, err := provider.LoadEnv("../../demo/providers.yaml", func(string) string { return "x" })
	if err != nil {
		t.Fatal(err)
	}
	for secret, want := range map[string]bool{"whsec-of-our-own": false, "demo-webhook-secret": true, "whsec-chaos": true, "mine,whsec-test": true} {
		var log bytes.Buffer
		warnPublishedWebhookSecrets(registry, func(string) string { return secret }, slog.New(slog.NewTextHandler(&log, nil)))
		if got := strings.Count(log.String(), "level=WARN"); got != map[bool]int{false: 0, true: 1}[want] {
			t.Errorf("secret %q: %d warnings, want warned %v:\n%s", secret, got, want, log.String())
		}
	}
}

// TestPublishedWebhookSecretsListsTheRepositorys: every webhook secret
// the repository's files set is in publishedWebhookSecrets, so a new one
// cannot be added without serve warning about it.
func TestPublishedWebhookSecretsListsTheRepositorys(t *testing.T) {
	t.Parallel()
	set := regexp.MustCompile(`WEBHOOK_SECRET(?:: |="?\$\{[A-Z_]+:-)([A-Za-z0-9_-]+)`)
	for _, file := range []string{"../../compose.yaml", "../../demo/run.sh"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		matches := set.FindAllStringSubmatch(string(raw), -1)
		if len(matches) == 0 {
			t.Errorf("%s sets no webhook secret: update this test", file)
		}
		for _, m := range matches {
			if _, ok := publishedWebhookSecrets[m[1]]; !ok {
				t.Errorf("%s sets the webhook secret %q, which publishedWebhookSecrets lacks", file, m[1])
			}
		}
	}
	chaos, err := os.ReadFile("../actchaos/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`webhookSecret = "([^"]+)"`).FindStringSubmatch(string(chaos)); m == nil || publishedWebhookSecrets[m[1]] == "" {
		t.Errorf("cmd/actchaos's webhook secret %v is not in publishedWebhookSecrets", m)
	}
	if publishedWebhookSecrets[testpipeline.WebhookSecret] == "" {
		t.Errorf("testpipeline.WebhookSecret is not in publishedWebhookSecrets")
	}
}
