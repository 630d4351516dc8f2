package github_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/github"
	"github.com/actledger/actledger/internal/mocksupplier/internal/faketest"
)

// receiver starts a webhook endpoint answering statuses in turn (the last one from then on;
// 204 when none are given) and returns its URL and the requests it gets.
func receiver(t *testing.T, statuses ...int) (string, <-chan faketest.Received) {
	t.Helper()
	then := http.StatusNoContent
	if len(statuses) > 0 {
		then = statuses[len(statuses)-1]
	}
	return faketest.Receiver(t, then, statuses...)
}

// expectedSignature computes X-Hub-Signature-256 independently of the fake.
func expectedSignature(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func TestWebhookIsTheIssuesEventSignedAsGitHubSigns(t *testing.T) {
	t.Parallel()
	url, got := receiver(t)
	f := setup(t, github.Config{Webhook: &github.WebhookConfig{URL: url, Secret: "It's a Secret to Everybody"}})
	is := f.create(t, issueBody("al_hook"))

	hook := faketest.Next(t, got)
	if sig := hook.Header.Get("X-Hub-Signature-256"); !hmac.Equal([]byte(sig), []byte(expectedSignature("It's a Secret to Everybody", hook.Body))) {
		t.Errorf("X-Hub-Signature-256 = %q does not verify against the body", sig)
	}
	if !strings.HasPrefix(hook.Header.Get("X-Hub-Signature"), "sha1=") {
		t.Errorf("X-Hub-Signature = %q, want sha1=…", hook.Header.Get("X-Hub-Signature"))
	}
	for name, want := range map[string]string{
		"X-GitHub-Event": "issues",
		"Content-Type":   "application/json",
	} {
		if got := hook.Header.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if hook.Header.Get("X-GitHub-Delivery") == "" || !strings.HasPrefix(hook.Header.Get("User-Agent"), "GitHub-Hookshot/") {
		t.Errorf("headers %v lack X-GitHub-Delivery or the GitHub-Hookshot user agent", hook.Header)
	}

	var ev struct {
		Action string `json:"action"`
		Issue  issue  `json:"issue"`
		Repo   struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
		Sender struct {
			Login string `json:"login"`
		} `json:"sender"`
	}
	if err := json.Unmarshal(hook.Body, &ev); err != nil {
		t.Fatalf("decoding %s: %v", hook.Body, err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"action", ev.Action, "opened"},
		{"issue.number", ev.Issue.Number, is.Number},
		{"issue.html_url", ev.Issue.HTMLURL, is.HTMLURL},
		{"issue.Body", ev.Issue.Body, is.Body},
		{"repository.full_name", ev.Repo.FullName, "acme/support"},
		{"sender.login", ev.Sender.Login, github.DefaultLogin},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}

	faketest.WaitFor(t, 5*time.Second, func() bool { return len(f.gh.Deliveries()) == 1 })
	d := f.gh.Deliveries()[0]
	if d.GUID != hook.Header.Get("X-GitHub-Delivery") || d.Status != http.StatusNoContent || d.IssueNumber != is.Number || string(d.Body) != string(hook.Body) {
		t.Errorf("delivery = %+v, want the request sent, answered 204", d)
	}
}

func TestWebhookWithoutSecretIsUnsigned(t *testing.T) {
	t.Parallel()
	url, got := receiver(t)
	f := setup(t, github.Config{})
	f.gh.SetWebhook(&github.WebhookConfig{URL: url})
	f.create(t, issueBody("al_1"))

	hook := faketest.Next(t, got)
	if hook.Header.Get("X-Hub-Signature-256") != "" || hook.Header.Get("X-Hub-Signature") != "" {
		t.Errorf("a webhook without a secret was signed: %v", hook.Header)
	}
}

func TestWebhookIsSentOnceUnlessRedeliveriesAreAskedFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		attempts   int
		statuses   []int
		wantStatus []int
	}{
		{"GitHub does not redeliver by itself", 0, []int{500}, []int{500}},
		{"redelivered until acknowledged", 5, []int{500, 503, 200}, []int{500, 503, 200}},
		{"redeliveries run out", 2, []int{500}, []int{500, 500}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, got := receiver(t, tc.statuses...)
			f := setup(t, github.Config{Webhook: &github.WebhookConfig{URL: url, Secret: "s", Attempts: tc.attempts}})
			f.create(t, issueBody("al_1"))

			var bodies []string
			for range tc.wantStatus {
				bodies = append(bodies, string(faketest.Next(t, got).Body))
			}
			faketest.WaitFor(t, 5*time.Second, func() bool { return len(f.gh.Deliveries()) == len(tc.wantStatus) })
			ds := f.gh.Deliveries()
			guids := map[string]bool{}
			for i, d := range ds {
				if d.Attempt != i+1 || d.Status != tc.wantStatus[i] || bodies[i] != bodies[0] {
					t.Errorf("delivery %d = attempt %d answered %d (%s); want attempt %d answered %d with the same body", i, d.Attempt, d.Status, d.Err, i+1, tc.wantStatus[i])
				}
				guids[d.GUID] = true
			}
			if len(guids) != len(ds) {
				t.Errorf("attempts share an X-GitHub-Delivery: %v", guids)
			}
			select {
			case extra := <-got:
				t.Errorf("webhook sent again: %s", extra.Body)
			case <-time.After(300 * time.Millisecond):
			}
		})
	}
}

func TestCloseStopsPendingWebhooks(t *testing.T) {
	t.Parallel()
	url, got := receiver(t)
	f := setup(t, github.Config{Webhook: &github.WebhookConfig{URL: url, Delay: time.Hour}})
	f.create(t, issueBody("al_1"))

	closed := make(chan struct{})
	go func() {
		f.gh.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a webhook was pending")
	}
	f.gh.Close() // idempotent
	select {
	case r := <-got:
		t.Errorf("webhook sent after Close: %s", r.Body)
	default:
	}
}
