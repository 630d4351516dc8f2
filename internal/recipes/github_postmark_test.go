package recipes_test

import (
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/github"
	"github.com/actledger/actledger/internal/mocksupplier/postmark"
	"github.com/actledger/actledger/internal/testpipeline"
)

const (
	githubToken   = "ghp_recipeTESTtoken0123456789"
	githubSecret  = "github-webhook-secret-for-recipes"
	postmarkToken = "pm-server-token-0f3e9a1c-recipes"
)

var githubRecipe = recipe{
	page: "github.md", provider: "github", action: "github.open_issue",
	params:  `{"title":"Printer on fire","body":"Third floor.","labels":["hardware"]}`,
	env:     map[string]string{"GITHUB_TOKEN": githubToken, "GITHUB_WEBHOOK_SECRET": githubSecret},
	secrets: []string{githubToken, githubSecret},
	lag:     16 * time.Minute,
	start: func(t *testing.T, clock *testpipeline.Clock) *fake {
		s := github.New(github.Config{Token: githubToken, LookupLag: time.Minute, Now: clock.Now})
		t.Cleanup(s.Close)
		return &fake{
			url: newServer(t, s), effects: s.Effects, credential: "Authorization",
			loseNext: func() { s.SetFaults("", github.Fault{Kind: github.DropAfterCommit}) },
			requests: s.Requests,
			webhooks: func(url string) {
				s.SetWebhook(&github.WebhookConfig{URL: url, Secret: githubSecret, Delay: 100 * time.Millisecond})
			},
		}
	},
}

var postmarkRecipe = recipe{
	page: "postmark.md", provider: "postmark", action: "email.send",
	params:  `{"to":"ann@example.com","subject":"Your order","text":"It ships today."}`,
	env:     map[string]string{"POSTMARK_SERVER_TOKEN": postmarkToken},
	secrets: []string{postmarkToken},
	lag:     11 * time.Minute,
	start: func(t *testing.T, clock *testpipeline.Clock) *fake {
		s := postmark.New(postmark.Config{ServerToken: postmarkToken, LookupLag: time.Minute, Now: clock.Now})
		return &fake{
			url: newServer(t, s), effects: s.Effects, credential: "X-Postmark-Server-Token",
			loseNext: func() { s.SetFaults("", postmark.Fault{Kind: postmark.DropAfterCommit}) },
			requests: s.Requests,
		}
	},
}

// GitHub takes no idempotency key: after a response lost once the issue
// exists, actledger never resends blindly; the search (past its lag)
// finds the one issue by the reference written into it.
func TestGitHubRecipeLostResponseIsFoundBySearchNotReopened(t *testing.T) {
	t.Parallel()
	run(t, githubRecipe, false)
}

// GitHub's signed issues webhook (X-Hub-Signature-256) names the
// reference written into the issue, and settles the lost response before
// any search.
func TestGitHubRecipeLostResponseIsSettledByTheSignedWebhook(t *testing.T) {
	t.Parallel()
	run(t, githubRecipe, true)
}

// Postmark takes no idempotency key and signs no webhook: the outbound
// messages search by metadata finds the one email past the lag.
func TestPostmarkRecipeLostResponseSendsOneEmail(t *testing.T) {
	t.Parallel()
	run(t, postmarkRecipe, false)
}
