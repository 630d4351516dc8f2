package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/webhook"
)

// TestType is the type of the event `actledger notifications test` sends.
const TestType = "notification.test"

// Body is what a receiver is sent: {"type", "timestamp", "data"}.
type Body struct {
	Type string `json:"type"`
	// Timestamp is when the event happened (RFC 3339, UTC), the same on
	// every attempt; webhook-timestamp is the attempt's.
	Timestamp time.Time `json:"timestamp"`
	Data      Data      `json:"data"`
}

// Data is an event's ids and words. It never holds params or supplier
// answers: a receiver that needs them asks the API with its own token.
type Data struct {
	// OperationID is null for unmatched evidence (EvidenceID).
	OperationID *uuid.UUID `json:"operation_id"`
	// EvidenceID names unmatched evidence, a review item of its own.
	EvidenceID *int64 `json:"evidence_id,omitempty"`
	// Action is null for unmatched evidence.
	Action *string `json:"action"`
	// Status is the operation's state the event reports.
	Status  string `json:"status"`
	Summary string `json:"summary"`
	// Scope is the operation's access scope, null for the whole
	// tenant's, so a receiver can route it.
	Scope      *string `json:"scope"`
	ConsoleURL string  `json:"console_url"`
	// ApprovedBy names who approved the operation ("person:<email>",
	// "approver:<token name>", "policy:<version>"); absent before a
	// decision.
	ApprovedBy *string `json:"approved_by,omitempty"`
}

// NewBody builds n's body, with console links under consoleURL (the
// console's address as people reach it, e.g. https://actledger.example/console).
func NewBody(n ledger.Notification, consoleURL string) Body {
	base := strings.TrimRight(consoleURL, "/")
	d := Data{OperationID: n.OperationID, EvidenceID: n.EvidenceID, Action: n.Action, Status: string(n.Status),
		Summary: n.Summary(), Scope: n.Scope, ConsoleURL: base + "/review", ApprovedBy: n.ApprovedBy}
	if n.OperationID != nil {
		d.ConsoleURL = base + "/operations/" + n.OperationID.String()
	}
	return Body{Type: string(n.Type), Timestamp: n.At.UTC(), Data: d}
}

// TestBody is the body of a test event for receiver: it names no
// operation and says that nothing happened.
func TestBody(receiver string, at time.Time, consoleURL string) Body {
	return Body{Type: TestType, Timestamp: at.UTC(), Data: Data{
		Status:     "test",
		Summary:    fmt.Sprintf("A test notification from actledger to receiver %s; nothing happened.", receiver),
		ConsoleURL: strings.TrimRight(consoleURL, "/") + "/",
	}}
}

// Answer is what a receiver said to one attempt.
type Answer struct {
	Status int
	// Body is the start of the receiver's answer (at most maxAnswer
	// bytes), for the test command and the delivery record.
	Body []byte
}

// maxAnswer bounds how much of a receiver's answer is read.
const maxAnswer = 4 << 10

// OK reports whether the receiver took the event (2xx).
func (a Answer) OK() bool { return a.Status >= 200 && a.Status < 300 }

// errRedirect is the error of a receiver that answered with a redirect:
// the event is not sent to another address.
var errRedirect = errors.New("the receiver answered with a redirect, which is not followed")

// NewClient returns the HTTP client of one receiver: its own connections
// (so a receiver that hangs holds none of another's), each request
// bounded by timeout, redirects never followed.
func NewClient(timeout time.Duration) *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 16
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Send POSTs body to r: signed as Standard Webhooks (webhook-id id, the
// event's, the same on every attempt; webhook-timestamp at; and
// webhook-signature v1,<base64 HMAC-SHA256 of id.timestamp.body> under
// r's secret), or, for a Slack receiver, as a Slack message (SlackMessage).
// An answer that came back is returned even when it is not a success; err
// says why there is none, or that it was a redirect.
func Send(ctx context.Context, client *http.Client, r *provider.Notification, id string, at time.Time, body Body) (Answer, error) {
	var raw []byte
	var err error
	if r.Format == provider.FormatSlack {
		raw, err = json.Marshal(SlackMessage(body))
	} else {
		raw, err = json.Marshal(body)
	}
	if err != nil {
		return Answer{}, fmt.Errorf("encode notification %s: %w", id, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.Endpoint(), bytes.NewReader(raw))
	if err != nil {
		// Not err itself: it would quote a Slack receiver's URL.
		return Answer{}, fmt.Errorf("notification request to %s: cannot build it", r.Name)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "actledger-notifications")
	if r.Format != provider.FormatSlack {
		sig, err := webhook.SignStandard(r.Secret(), id, at, raw)
		if err != nil {
			return Answer{}, fmt.Errorf("sign notification %s for %s: %w", id, r.Name, err)
		}
		req.Header.Set(webhook.StandardIDHeader, id)
		req.Header.Set(webhook.StandardTimestampHeader, strconv.FormatInt(at.Unix(), 10))
		req.Header.Set(webhook.StandardSignatureHeader, sig)
	}
	res, err := client.Do(req)
	if err != nil {
		if r.Format == provider.FormatSlack {
			// A *url.Error quotes the URL, which is a Slack receiver's
			// secret: keep the cause only.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = fmt.Errorf("%s %s: %w", ue.Op, r.URL, ue.Err)
			}
		}
		return Answer{}, err
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	a := Answer{Status: res.StatusCode, Body: answer}
	if res.StatusCode >= 300 && res.StatusCode < 400 {
		return a, errRedirect
	}
	return a, nil
}
