package notify_test

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/notify"
)

// slackWebhook is a Slack incoming webhook as Slack documents it
// ("Sending messages using incoming webhooks",
// https://api.slack.com/incoming-webhooks): a POST of a JSON object,
// Content-type application/json, whose "text" is the message; it answers
// 200 "ok", and 400 "invalid_payload" to a body that is not such an
// object, 400 "no_text" to one without text.
type slackWebhook struct {
	mu       sync.Mutex
	messages []string
	headers  []http.Header
}

func newSlackWebhook(t *testing.T) (*slackWebhook, *httptest.Server) {
	t.Helper()
	s := &slackWebhook{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/services/T000/B000/secret-part" {
			http.Error(w, "no_service", http.StatusNotFound)
			return
		}
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			http.Error(w, "invalid_payload", http.StatusBadRequest)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		var payload map[string]any
		if err := json.Unmarshal(raw, &payload); err != nil {
			http.Error(w, "invalid_payload", http.StatusBadRequest)
			return
		}
		text, ok := payload["text"].(string)
		if !ok || text == "" {
			http.Error(w, "no_text", http.StatusBadRequest)
			return
		}
		for k := range payload {
			if k != "text" {
				t.Errorf("the message has a field %q beside text: %s", k, raw)
			}
		}
		s.mu.Lock()
		s.messages = append(s.messages, text)
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return s, srv
}

func (s *slackWebhook) got() ([]string, []http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.messages...), append([]http.Header(nil), s.headers...)
}

// TestSlackReceiverGetsOneMessageWithTheSummaryAndALinkNeverTheParams: a
// proposal reaches a format: slack receiver through the outbox, JetStream
// and the notification worker as one Slack message that says what happened,
// gives the summary and links the console; it carries no params, and no
// signature (Slack cannot verify one: the URL is the secret).
func TestSlackReceiverGetsOneMessageWithTheSummaryAndALinkNeverTheParams(t *testing.T) {
	t.Parallel()
	slack, srv := newSlackWebhook(t)
	p := testpipeline.New(t, testpipeline.Options{
		Env: map[string]string{"SLACK_APPROVERS_URL": srv.URL + "/services/T000/B000/secret-part"},
		Notifications: `  approvers-channel:
    format: slack
    url_env: SLACK_APPROVERS_URL
    tenant: "Acme Corp."
    events: [approval.requested]
`,
		Notify: fastRetries,
	})
	p.Start(1)
	status, out := p.Propose("po-slack", `{"sku":"SKU-PRIVATE-991","qty":3}`)
	if status != http.StatusAccepted {
		t.Fatalf("propose: %d %v", status, out)
	}
	op := p.Operation(out)
	p.Eventually(10*time.Second, "the Slack message", func() bool { m, _ := slack.got(); return len(m) > 0 })
	notificationsSettled(t, p)
	messages, headers := slack.got()
	if len(messages) != 1 {
		t.Fatalf("Slack got %d messages, want 1: %q", len(messages), messages)
	}
	text := messages[0]
	link := "<" + consoleURL + "/operations/" + op.ID.String() + "|Open in the actledger console>"
	for _, want := range []string{"*Approval requested*", op.Summary(), link} {
		if !strings.Contains(text, want) {
			t.Errorf("the message %q does not hold %q", text, want)
		}
	}
	if strings.Contains(text, "SKU-PRIVATE") {
		t.Errorf("the message carries the params: %q", text)
	}
	if h := headers[0].Get("webhook-signature"); h != "" {
		t.Errorf("the Slack message is signed (%q): Slack cannot verify a signature", h)
	}
}

func TestSlackMessageEscapesWhatSlackReadsAsMarkup(t *testing.T) {
	t.Parallel()
	got := notify.SlackMessage(notify.Body{Type: "review.opened", Data: notify.Data{
		Summary:    "order <!channel> & <https://evil.example|click> \u202e",
		ConsoleURL: "https://actledger.example/console/review?a=1|b",
	}}).Text
	want := "*Review opened*: order &lt;!channel&gt; &amp; &lt;https://evil.example|click&gt; \\u202e\n" +
		"<https://actledger.example/console/review?a=1%7Cb|Open in the actledger console>"
	if got != want {
		t.Errorf("text\n%q,\nwant\n%q", got, want)
	}
}
