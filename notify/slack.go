package notify

import (
	"fmt"
	"strings"

	"github.com/actledger/actledger/internal/display"
)

// Slack is the payload of a message to a Slack incoming webhook: a JSON
// object with the message in "text", posted as application/json, which
// Slack answers 200 "ok" ("Sending messages using incoming webhooks",
// https://api.slack.com/incoming-webhooks; and
// https://docs.slack.dev/tools/java-slack-sdk/guides/incoming-webhooks).
type Slack struct {
	Text string `json:"text"`
}

// slackHeadlines say what happened, by event type.
var slackHeadlines = map[string]string{
	"approval.requested": "Approval requested",
	"review.opened":      "Review opened",
	"operation.settled":  "Operation settled",
	TestType:             "Test notification",
}

// SlackMessage is body as a Slack message: what happened, the summary and
// a link to the console, never params or supplier answers (the body holds
// none). Slack reads &, < and > as control characters of its markup, so
// the text is escaped as it asks (&amp; &lt; &gt;,
// https://docs.slack.dev/messaging/formatting-message-text/), and every
// hidden character is shown escaped as everywhere else (display.Line):
// no summary can make a link or a mention of its own.
func SlackMessage(body Body) Slack {
	headline := slackHeadlines[body.Type]
	if headline == "" {
		headline = body.Type
	}
	if body.Type == "operation.settled" && body.Data.Status != "" {
		headline += " (" + body.Data.Status + ")"
	}
	summary := display.Line(body.Data.Summary)
	if body.Data.ApprovedBy != nil {
		summary += " Approved by " + display.Line(*body.Data.ApprovedBy) + "."
	}
	text := fmt.Sprintf("*%s*: %s\n<%s|Open in the actledger console>",
		slackEscape(headline), slackEscape(summary), slackLink(body.Data.ConsoleURL))
	return Slack{Text: text}
}

var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func slackEscape(s string) string { return slackEscaper.Replace(s) }

// slackLink is a URL inside <url|text>: escaped, and without the "|"
// that would end it early.
func slackLink(u string) string { return strings.ReplaceAll(slackEscape(u), "|", "%7C") }
