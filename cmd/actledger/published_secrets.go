package main

import (
	"log/slog"
	"slices"
	"strings"

	"github.com/actledger/actledger/provider"
)

// publishedWebhookSecrets are webhook signing secrets written in this
// repository, by where: whoever has read it can sign a webhook that
// settles an operation. They are fine for a demo on a laptop and must
// never sign a deployment's webhooks. TestPublishedWebhookSecretsListsTheRepositorys
// keeps the list in step with the files.
var publishedWebhookSecrets = map[string]string{
	"demo-webhook-secret": "compose.yaml and demo/run.sh (make run)",
	"whsec-chaos":         "cmd/actchaos",
	"whsec-test":          "internal/testpipeline",
}

// warnPublishedWebhookSecrets logs at WARN, once per environment
// variable, every variable of the providers file's webhook secrets that
// holds a secret of publishedWebhookSecrets (or, during a rotation, one of
// its comma-separated secrets does). It names the variable, the providers
// and where the secret is published, never the secret.
func warnPublishedWebhookSecrets(registry *provider.Registry, getenv func(string) string, logger *slog.Logger) {
	type finding struct {
		providers []string
		where     string
	}
	found := map[string]*finding{}
	var order []string
	for _, pc := range registry.Providers() {
		name := pc.WebhookSecretEnv
		if pc.Webhook != nil {
			name = pc.Webhook.SecretEnv
		}
		for _, secret := range pc.WebhookSecretsFrom(getenv) {
			where, ok := publishedWebhookSecrets[string(secret)]
			if !ok {
				continue
			}
			f := found[name]
			if f == nil {
				f = &finding{where: where}
				found[name] = f
				order = append(order, name)
			}
			if !slices.Contains(f.providers, pc.Name) {
				f.providers = append(f.providers, pc.Name)
			}
		}
	}
	for _, name := range order {
		f := found[name]
		logger.Warn("a webhook secret is one published in actledger's repository: anyone who has read it can sign webhooks "+
			"that settle operations; set a secret of your own before this instance takes real webhooks",
			"variable", name, "providers", strings.Join(f.providers, ","), "published_in", f.where)
	}
}
