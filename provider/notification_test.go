package provider

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// notifyDoc is a providers file with one receiver whose keys are lines.
func notifyDoc(name string, lines ...string) string {
	doc := providerDoc("acme") + "notifications:\n  " + name + ":\n"
	for _, l := range lines {
		doc += "    " + l + "\n"
	}
	return doc
}

const notifySecret = "whsec_c2VjcmV0LWtleS1vZi10aGUtcmVjZWl2ZXI="

func notifyEnv(name string) string {
	return map[string]string{"NOTIFY_SECRET": notifySecret, "NOT_A_SECRET": "whsec_!!!",
		"SLACK_URL": "https://hooks.slack.com/services/T000/B000/XXXX", "SLACK_APPROVERS_URL": "https://hooks.slack.com/services/T000/B001/YYYY", "SLACK_PLAIN": "http://hooks.slack.com/services/T000/B000/XXXX"}[name]
}

// TestSlackReceiverReadsItsURLFromTheEnvironmentAndShowsOnlyItsHost: the
// URL of a Slack incoming webhook is the secret: it is read from url_env,
// used to send, and never shown (URL is its host only).
func TestSlackReceiverReadsItsURLFromTheEnvironmentAndShowsOnlyItsHost(t *testing.T) {
	t.Parallel()
	reg, err := ParseEnv([]byte(notifyDoc("approvers", "format: slack", "url_env: SLACK_URL", "tenant: acme-corp", "events: [approval.requested]")), notifyEnv)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := reg.Notification("approvers")
	if n.Endpoint() != "https://hooks.slack.com/services/T000/B000/XXXX" || n.URL != "https://hooks.slack.com/…" || n.Format != FormatSlack {
		t.Errorf("receiver %+v (endpoint %q), want the URL read and shown by its host", n, n.Endpoint())
	}
	for _, tt := range []struct{ name, line, want string }{
		{"url in the file", "url: https://hooks.slack.com/services/T000/B000/XXXX", `url: a slack receiver's URL is itself a secret`},
		{"a secret_env", "secret_env: NOTIFY_SECRET", `secret_env: a slack receiver is not signed`},
	} {
		_, err := ParseEnv([]byte(notifyDoc("r", "format: slack", "url_env: SLACK_URL", "tenant: t", "events: [review.opened]", tt.line)), notifyEnv)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	for _, tt := range []struct{ name, urlEnv, want string }{
		{"no url_env", "", `url_env: is required`},
		{"unset", "url_env: UNSET_URL", `url_env: environment variable UNSET_URL is not set`},
		{"plain http", "url_env: SLACK_PLAIN", `url_env: environment variable SLACK_PLAIN does not hold an https URL`},
	} {
		_, err := ParseEnv([]byte(notifyDoc("r", "format: slack", tt.urlEnv, "tenant: t", "events: [review.opened]")), notifyEnv)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "XXXX") {
			t.Errorf("%s: the error shows the URL: %v", tt.name, err)
		}
	}
	if _, err := ParseEnv([]byte(notifyDoc("r", "format: teams", "url: https://x.example/a", "secret_env: NOTIFY_SECRET", "tenant: t", "events: [review.opened]")), notifyEnv); err == nil || !strings.Contains(err.Error(), `format: "teams" is not a format`) {
		t.Errorf("unknown format: %v", err)
	}
}

// TestNotificationsLoadWithTheirSecretRead: the contract's example loads,
// the secret is read from its variable once, and the receiver takes the
// events it lists.
func TestNotificationsLoadWithTheirSecretRead(t *testing.T) {
	t.Parallel()
	reg, err := ParseEnv([]byte(notifyDoc("approvals-relay", "url: https://hooks.acme.example/actledger", "secret_env: NOTIFY_SECRET",
		"tenant: acme-corp", "events: [approval.requested, review.opened, operation.settled]")), notifyEnv)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := reg.Notification("approvals-relay")
	if !ok || len(reg.Notifications()) != 1 {
		t.Fatalf("receivers %v, want approvals-relay", reg.Notifications())
	}
	if string(n.Secret()) != notifySecret || n.Tenant != "acme-corp" || !slices.Equal(n.Events, NotificationEvents) {
		t.Errorf("receiver %+v, want the secret read, tenant acme-corp and every event", n)
	}
	if n.Takes("approval.requested") != true || n.Takes("operation.started") {
		t.Error("Takes disagrees with the events listed")
	}
	if _, err := ParseEnv([]byte(notifyDoc("local", "url: http://127.0.0.1:9300/hook", "secret_env: NOTIFY_SECRET",
		"tenant: t", "events: [operation.settled]")), notifyEnv); err != nil {
		t.Errorf("plain http to a loopback host: %v, want it loaded", err)
	}
}

// TestNotificationsRefusedAtLoadNamingTheField: a receiver that could not
// work stops the load, naming the receiver, the field and the variable,
// never a secret's value.
func TestNotificationsRefusedAtLoadNamingTheField(t *testing.T) {
	t.Parallel()
	ok := []string{"url: https://hooks.acme.example/a", "secret_env: NOTIFY_SECRET", "tenant: acme-corp", "events: [operation.settled]"}
	with := func(field, line string) []string {
		out := []string{}
		for _, l := range ok {
			if !strings.HasPrefix(l, field+":") {
				out = append(out, l)
			}
		}
		if line != "" {
			out = append(out, line)
		}
		return out
	}
	for _, tt := range []struct {
		name  string
		doc   string
		want  string
		never string
	}{
		{"unknown event", notifyDoc("r", with("events", "events: [approval.requested, operation.started]")...),
			`notification "r": events: "operation.started" is not an event; events are approval.requested, review.opened, operation.settled`, ""},
		{"no events", notifyDoc("r", with("events", "events: []")...), `notification "r": events: must list at least one`, ""},
		{"event twice", notifyDoc("r", with("events", "events: [review.opened, review.opened]")...), `events: "review.opened" is listed twice`, ""},
		{"no tenant", notifyDoc("r", with("tenant", "")...), `notification "r": tenant: is required`, ""},
		{"no url", notifyDoc("r", with("url", "")...), `notification "r": url: is required`, ""},
		{"plain http elsewhere", notifyDoc("r", with("url", "url: http://hooks.acme.example/a")...), `notification "r": url: "http://hooks.acme.example/a" is plain http to a host that is not loopback`, ""},
		{"not a url", notifyDoc("r", with("url", "url: hooks.acme.example")...), `url: "hooks.acme.example" is not an absolute http(s) URL`, ""},
		{"credentials in the url", notifyDoc("r", with("url", "url: https://u:p@hooks.acme.example/a")...), `url: must not carry credentials`, ""},
		{"no secret_env", notifyDoc("r", with("secret_env", "")...), `notification "r": secret_env: is required`, ""},
		{"secret unset", notifyDoc("r", with("secret_env", "secret_env: UNSET_SECRET")...), `notification "r": secret_env: environment variable UNSET_SECRET is not set or is empty`, ""},
		{"secret in place of the name", notifyDoc("r", with("secret_env", "secret_env: 'whsec_abc=='")...), `secret_env: is not an environment variable name`, "whsec_abc"},
		{"unusable secret", notifyDoc("r", with("secret_env", "secret_env: NOT_A_SECRET")...), `notification "r": secret_env: environment variable NOT_A_SECRET:`, "!!!"},
		{"bad name", notifyDoc("r.1", ok...), `notification "r.1": name: "r.1" may hold only letters, digits, '-' and '_'`, ""},
		{"unknown key", notifyDoc("r", append(ok, "secret: x")...), `field secret not found`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseEnv([]byte(tt.doc), notifyEnv)
			if err == nil {
				t.Fatalf("loaded, want %q\n%s", tt.want, tt.doc)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\ndoes not contain %q", err, tt.want)
			}
			if tt.never != "" && strings.Contains(err.Error(), tt.never) {
				t.Errorf("error %q shows the secret", err)
			}
		})
	}
}

// TestNotificationsDocExampleLoads: the notifications example of
// docs/notifications.md loads as written, with its secret variable set.
func TestNotificationsDocExampleLoads(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "notifications.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\nnotifications:\n")
	example, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("docs/notifications.md holds no ```yaml block starting with notifications:")
	}
	reg, err := ParseEnv([]byte(providerDoc("acme")+"notifications:\n"+example), notifyEnv)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := reg.Notification("approvals-relay"); !ok || !slices.Equal(n.Events, NotificationEvents) {
		t.Errorf("docs/notifications.md example: %+v, %v", n, ok)
	}
}
