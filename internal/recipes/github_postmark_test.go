package recipes_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/github"
	"github.com/actledger/actledger/internal/mocksupplier/postmark"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
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
			effectID: func(reference string) string {
				for _, m := range s.Messages() {
					if m.Metadata["actledger_reference"] == reference {
						return m.MessageID
					}
				}
				return ""
			},
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

// githubFake is githubRecipe's fake and the server behind it.
func githubFake(t *testing.T, clock *testpipeline.Clock) (*github.Server, *fake) {
	s := github.New(github.Config{Token: githubToken, LookupLag: time.Minute, Now: clock.Now})
	t.Cleanup(s.Close)
	return s, &fake{
		url: newServer(t, s), effects: s.Effects, credential: "Authorization",
		loseNext: func() { s.SetFaults("", github.Fault{Kind: github.DropAfterCommit}) },
		requests: s.Requests,
	}
}

// githubIssue opens an issue at the fake GitHub as a person would by hand,
// with body.
func githubIssue(t *testing.T, baseURL, body string) {
	t.Helper()
	raw, _ := json.Marshal(map[string]string{"title": "By hand", "body": body})
	req, _ := http.NewRequest("POST", baseURL+"/repos/acme/support/issues", bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+githubToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("open an issue by hand: %d", resp.StatusCode)
	}
}

// creates counts the create requests the fake received.
func creates(f *fake) int {
	n := 0
	for _, r := range f.requests() {
		if r.Method == http.MethodPost {
			n++
		}
	}
	return n
}

// GitHub's search may stop at its time limit and say incomplete_results:
// true. lookup.complete makes such an answer inconclusive, never
// "absent": the issue whose answer was lost is not opened again, the
// search is asked again after the lag, and when the retry budget ends
// with every search inconclusive the operation waits for a person
// (outcome_unknown), one issue at GitHub and one create sent. (The
// repository's issue list is down meanwhile, so that no statement
// settles it first.)
func TestGitHubRecipeIncompleteSearchIsNeverAbsentAndEndsWithAPerson(t *testing.T) {
	t.Parallel()
	clock := &testpipeline.Clock{}
	s, f := githubFake(t, clock)
	s.SetSearchTimeouts(-1)
	s.SetListOutages(-1)
	p := testpipeline.New(t, testpipeline.Options{
		ProvidersFile: providersFile(t, githubRecipe.page), BaseURLs: map[string]string{"github": f.url},
		Tenant: "acme-corp", Env: githubRecipe.env, Clock: clock, Lease: time.Minute,
	})
	f.loseNext()
	op := p.EnqueueAction(githubRecipe.action, "k-1", githubRecipe.params)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusUnknown, settle)
	inconclusive := func() int {
		n := 0
		for _, k := range p.Kinds(op) {
			if k == string(ledger.EventLookupInconclusive) {
				n++
			}
		}
		return n
	}
	for asked := 0; p.Get(op).Status != ledger.StatusReview; asked++ {
		if asked > 10 {
			t.Fatalf("still %s after %d inconclusive searches; history:\n%s", p.Get(op).Status, asked, p.History(op))
		}
		clock.Advance(16 * time.Minute) // past the visibility lag
		p.Eventually(settle, "the search to be asked again", func() bool {
			return inconclusive() > asked || p.Get(op).Status == ledger.StatusReview
		})
		if got := p.Get(op); got.Status != ledger.StatusUnknown && got.Status != ledger.StatusReview {
			t.Fatalf("after an inconclusive search the operation is %s; history:\n%s", got.Status, p.History(op))
		}
		if n := creates(f); n != 1 {
			t.Fatalf("%d create requests after an inconclusive search, want the one lost: an incomplete answer is no absence", n)
		}
	}
	done := p.Get(op)
	if done.ReviewReason == nil || *done.ReviewReason != ledger.ReasonOutcomeUnknown {
		t.Fatalf("review reason %v, want outcome_unknown; history:\n%s", done.ReviewReason, p.History(op))
	}
	if history := p.History(op); !strings.Contains(history, "lookup_inconclusive") || !strings.Contains(history, "every lookup within the retry budget was inconclusive") {
		t.Fatalf("the history does not say the lookups were inconclusive:\n%s", history)
	}
	if n, c := f.effects(op.ExternalKey), creates(f); n != 1 || c != 1 {
		t.Fatalf("%d issues and %d creates at GitHub, want 1 and 1", n, c)
	}
}

// The repository's issue list is GitHub's statement: an issue whose answer
// was lost is settled by it at once, before any search (one issue, never
// a second create), an issue opened through actledger is matched, one
// opened by hand with a copied reference line is unexplained and one
// without is foreign.
func TestGitHubRecipeStatementSettlesALostIssue(t *testing.T) {
	t.Parallel()
	clock := &testpipeline.Clock{}
	s, f := githubFake(t, clock)
	p := statementPipeline(t, githubRecipe, f, clock)
	issue := func(title string) string { return fmt.Sprintf(`{"title":%q,"body":"Third floor."}`, title) }

	p.WaitStatus(p.EnqueueAction(githubRecipe.action, "k-1", issue("Printer on fire")), ledger.StatusSucceeded, settle)
	copied := stranger()
	githubIssue(t, f.url, "Copied from another issue.\n\nactledger reference: "+copied)
	githubIssue(t, f.url, "Opened by hand.")
	f.loseNext()
	lost := p.EnqueueAction(githubRecipe.action, "k-2", issue("Scanner on fire"))
	p.WaitStatus(lost, ledger.StatusUnknown, settle)

	rep := reconcileLastHour(t, p, "github", 2*time.Second)
	wantFindings(t, rep, map[ledger.Finding]int64{ledger.FindingMatched: 1, ledger.FindingSettles: 1, ledger.FindingUnexplained: 1, ledger.FindingForeign: 1})
	if got := unexplained(rep); !slices.Equal(got, []string{copied}) {
		t.Fatalf("unexplained %v, want the copied reference %s", got, copied)
	}
	var url string
	for _, is := range s.Issues() {
		if strings.Contains(is.Body, lost.ExternalKey) {
			url = is.HTMLURL
		}
	}
	settledByTheStatement(t, p, f, lost, url)
	if n := creates(f); n != 4 {
		t.Fatalf("%d create requests at GitHub, want 4 (two by actledger, two by hand)", n)
	}
}

// postmarkSend sends an email at the fake Postmark as another program of
// the account would, with metadata (nil: none).
func postmarkSend(t *testing.T, baseURL string, metadata map[string]string) {
	t.Helper()
	msg := map[string]any{"From": "support@acme.example", "To": "bob@example.com", "Subject": "By hand", "TextBody": "Hello."}
	if metadata != nil {
		msg["Metadata"] = metadata
	}
	raw, _ := json.Marshal(msg)
	req, _ := http.NewRequest("POST", baseURL+"/email", bytes.NewReader(raw))
	req.Header.Set("X-Postmark-Server-Token", postmarkToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("send by hand: %d", resp.StatusCode)
	}
}

// The outbound messages of the window, read by offset between fromdate
// and todate in Eastern time, are Postmark's statement: an email whose
// answer was lost is settled by it before any search (one email, never a
// second), an email sent through actledger is matched, one sent by
// another program under a copied reference is unexplained and one
// without any is foreign.
func TestPostmarkRecipeStatementSettlesALostEmail(t *testing.T) {
	t.Parallel()
	clock := &testpipeline.Clock{}
	f := postmarkRecipe.start(t, clock)
	p := statementPipeline(t, postmarkRecipe, f, clock)

	p.WaitStatus(p.EnqueueAction(postmarkRecipe.action, "k-1", postmarkRecipe.params), ledger.StatusSucceeded, settle)
	copied := stranger()
	postmarkSend(t, f.url, map[string]string{"actledger_reference": copied})
	postmarkSend(t, f.url, nil)
	f.loseNext()
	lost := p.EnqueueAction(postmarkRecipe.action, "k-2", `{"to":"ann@example.com","subject":"Your refund","text":"It is on its way."}`)
	p.WaitStatus(lost, ledger.StatusUnknown, settle)

	// The fake's search, which the list is, hides what is younger than a minute.
	rep := reconcileLastHour(t, p, "postmark", 2*time.Minute)
	wantFindings(t, rep, map[ledger.Finding]int64{ledger.FindingMatched: 1, ledger.FindingSettles: 1, ledger.FindingUnexplained: 1, ledger.FindingForeign: 1})
	if got := unexplained(rep); !slices.Equal(got, []string{copied}) {
		t.Fatalf("unexplained %v, want the copied reference %s", got, copied)
	}
	settledByTheStatement(t, p, f, lost, f.effectID(lost.ExternalKey))
}
