package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/actledger/actledger/internal/celexpr"
	"github.com/actledger/actledger/webhook"
)

// Webhook is how a supplier signs and shapes its webhooks (yaml
// "webhook"): which signature scheme it uses, and where in its body the
// event's id, our reference, the outcome and its own reference are.
type Webhook struct {
	// SecretEnv names the variable holding the signing secret(s), several
	// comma-separated while one is rotated (yaml "secret_env"); it must be
	// set when the registry is built.
	SecretEnv string
	// Signature is the scheme (yaml "signature"): "actledger" (v1's
	// Webhook-Signature), "stripe", "github" or "standard" (Standard
	// Webhooks) or "hmac" (the HMAC block says how). Default "actledger".
	Signature webhook.Scheme
	// HMAC is the shape of an "hmac" signature (yaml "hmac"): required with
	// it, refused with any other scheme.
	HMAC *webhook.HMAC
	// EventID, Reference, Outcome and ProviderReference are CEL
	// expressions over body (the parsed JSON) and headers (lower-case
	// names) (yaml "event_id", "reference", "outcome",
	// "provider_reference"). EventID is the supplier's id of the event
	// (replays are refused by it); Reference our external key as the
	// supplier echoes it; Outcome "succeeded", "failed" or "ignore";
	// ProviderReference the supplier's own reference of the effect.
	EventID, Reference, Outcome, ProviderReference string
}

// DefaultSignature is the scheme of a webhook block that names none, and
// of v1's webhook_secret_env.
const DefaultSignature = webhook.SchemeActledger

// WebhookOutcome is what a webhook says about the effect it names.
type WebhookOutcome string

// The outcomes a webhook's outcome expression may give.
const (
	// WebhookSucceeded: the effect exists.
	WebhookSucceeded WebhookOutcome = "succeeded"
	// WebhookFailed: the supplier refused it, with no effect.
	WebhookFailed WebhookOutcome = "failed"
	// WebhookIgnore: the event says nothing actledger acts on; it is
	// stored and changes nothing.
	WebhookIgnore WebhookOutcome = "ignore"
)

// WebhookEvent is what a provider's webhook expressions read from one
// verified webhook.
type WebhookEvent struct {
	EventID           string
	Reference         string
	Outcome           WebhookOutcome
	ProviderReference string
	// Type says what the event was, for the inbox.
	Type string
}

// ErrWebhookShape is wrapped by ReadWebhook's errors: the body, verified,
// is not what the provider's webhook expressions expect. The API answers
// 400; the supplier learns its event was not taken.
var ErrWebhookShape = errors.New("webhook body does not fit the provider's webhook expressions")

// HasWebhookExpressions reports whether the provider reads its webhooks
// with expressions (a webhook block), rather than v1's fixed body.
func (c *Config) HasWebhookExpressions() bool { return c.compiled.eventID != nil }

// SignatureScheme is the scheme the provider's webhooks are signed with.
func (c *Config) SignatureScheme() webhook.Scheme {
	if c.Webhook != nil && c.Webhook.Signature != "" {
		return c.Webhook.Signature
	}
	return DefaultSignature
}

// SignatureHeaders names the headers the provider's webhooks are signed
// in, for a supplier told what was wrong.
func (c *Config) SignatureHeaders() []string {
	if c.SignatureScheme() == webhook.SchemeHMAC && c.Webhook.HMAC != nil {
		return c.Webhook.HMAC.Headers()
	}
	return c.SignatureScheme().Headers()
}

// VerifyWebhook checks a webhook's signature the way the provider's
// scheme prescribes (webhook.VerifyRequest, or the HMAC block's
// webhook.HMAC.Verify), with the same errors.
func (c *Config) VerifyWebhook(h http.Header, body []byte, secrets [][]byte, now time.Time, tolerance time.Duration) error {
	if scheme := c.SignatureScheme(); scheme == webhook.SchemeHMAC && c.Webhook.HMAC != nil {
		return c.Webhook.HMAC.Verify(h, body, secrets, now, tolerance)
	}
	return webhook.VerifyRequest(c.SignatureScheme(), h, body, secrets, now, tolerance)
}

// ErrWebhookNotJSON is returned by ReadWebhook for a body that is not one
// JSON value.
var ErrWebhookNotJSON = errors.New("webhook body is not JSON")

// ReadWebhook evaluates the provider's webhook expressions over a verified
// webhook's body (parsed as JSON) and headers. An event whose outcome is
// ignore needs no reference; one that succeeded needs both references, as
// v1's body does. Its Type is the body's "type" field, else the
// X-GitHub-Event header, else the outcome.
func (c *Config) ReadWebhook(ctx context.Context, raw []byte, header http.Header) (WebhookEvent, error) {
	p := c.compiled
	if p.eventID == nil {
		return WebhookEvent{}, fmt.Errorf("provider %q reads no webhook expressions", c.Name)
	}
	body, ok := celexpr.ParseJSON(raw)
	if !ok {
		return WebhookEvent{}, ErrWebhookNotJSON
	}
	headers := headerValues(header)
	vars := map[string]any{"body": body, "headers": headers}
	bad := func(field string, err error) (WebhookEvent, error) {
		return WebhookEvent{}, fmt.Errorf("%w: webhook.%s: %w", ErrWebhookShape, field, err)
	}
	var ev WebhookEvent
	var err error
	if obj, isObject := body.(map[string]any); isObject {
		if t, isString := obj["type"].(string); isString {
			ev.Type = t
		}
	}
	if ev.Type == "" {
		ev.Type = headers["x-github-event"]
	}
	if ev.EventID, err = p.eventID.evalID(ctx, vars); err != nil {
		return bad("event_id", err)
	}
	outcome, err := p.webhookOutcome.evalNative(ctx, vars)
	if err != nil {
		return bad("outcome", err)
	}
	switch o := WebhookOutcome(fmt.Sprint(outcome)); o {
	case WebhookSucceeded, WebhookFailed, WebhookIgnore:
		ev.Outcome = o
		if ev.Type == "" {
			ev.Type = string(o)
		}
	default:
		return bad("outcome", fmt.Errorf(`is %q; it must be "succeeded", "failed" or "ignore"`, fmt.Sprint(outcome)))
	}
	ref, refErr := p.webhookReference.evalID(ctx, vars)
	var provRef string
	var provErr error
	if p.webhookProviderRef != nil {
		provRef, provErr = p.webhookProviderRef.evalID(ctx, vars)
	} else {
		provErr = errors.New("is not configured")
	}
	if ev.Outcome == WebhookIgnore {
		// An ignored event is kept as it came; what it names is kept
		// where it can be read.
		if refErr == nil {
			ev.Reference = ref
		}
		if provErr == nil {
			ev.ProviderReference = provRef
		}
		return ev, nil
	}
	if refErr != nil {
		return bad("reference", refErr)
	}
	ev.Reference = ref
	if provErr == nil {
		ev.ProviderReference = provRef
	} else if ev.Outcome == WebhookSucceeded {
		return bad("provider_reference", provErr)
	}
	return ev, nil
}
