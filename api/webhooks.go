package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/actledger/actledger/internal/request"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/webhook"
)

// maxEventIDLength bounds a supplier's event id. Any text is accepted
// within it (the Nats-Msg-Id carries a hash of it): a supplier whose ids
// were refused would resend them forever.
const maxEventIDLength = 1024

var errUnknownProvider = errorf(http.StatusNotFound, "unknown_provider", "no webhooks are configured for this provider")

// webhookRequest is the part of a supplier's webhook body the inbox reads.
// Unknown fields are allowed (suppliers add fields); the whole body is kept
// as the event's payload.
type webhookRequest struct {
	EventID           string                `json:"event_id"`
	Type              string                `json:"type"`
	Reference         string                `json:"reference"`
	ProviderReference string                `json:"provider_reference"`
	Status            ledger.EvidenceStatus `json:"status"`
}

// webhook is POST /v1/webhooks/{provider}. There is no bearer token: the
// signature is the authentication. Checks run in this order: provider
// configured (404), size (413), signature (401), JSON (400); the event is
// then stored with its evidence message, and the answer is 2xx only after
// the commit.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	r = r.WithContext(ctx)

	name := r.PathValue("provider")
	if s.cfg.WebhookSecrets == nil {
		s.writeError(w, r, errUnknownProvider)
		return
	}
	secrets, ok := s.cfg.WebhookSecrets(name)
	if !ok {
		s.writeError(w, r, errUnknownProvider)
		return
	}
	body, err := s.readBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pc, _ := s.cfg.Registry.Provider(name)
	scheme := webhook.SchemeActledger
	verify := func() error {
		return webhook.VerifyRequest(scheme, r.Header, body, secrets, s.cfg.Ledger.Now(), webhook.DefaultTolerance)
	}
	headerNames := scheme.Headers()
	if pc != nil {
		scheme, headerNames = pc.SignatureScheme(), pc.SignatureHeaders()
		verify = func() error {
			return pc.VerifyWebhook(r.Header, body, secrets, s.cfg.Ledger.Now(), webhook.DefaultTolerance)
		}
	}
	// Nothing in the body is looked at before the signature holds.
	if err := verify(); err != nil {
		// The reason is a fixed word: the error text may quote part of
		// the header, and neither the signature nor the body is logged.
		reason := signatureFailure(err)
		s.log.WarnContext(ctx, "webhook refused", "provider", name, "scheme", scheme, "reason", reason)
		if s.cfg.OnWebhookRejected != nil {
			s.cfg.OnWebhookRejected(name, reason)
		}
		headers := signatureHeaders(headerNames)
		if errors.Is(err, webhook.ErrStale) {
			s.writeError(w, r, errorf(http.StatusUnauthorized, "stale_signature",
				"the "+headers+" timestamp is too far from now; nothing was stored"))
		} else {
			s.writeError(w, r, errorf(http.StatusUnauthorized, "invalid_signature",
				"the "+headers+" missing, malformed or does not match the body; nothing was stored"))
		}
		return
	}
	var req webhookRequest
	if pc != nil && pc.HasWebhookExpressions() {
		ev, err := pc.ReadWebhook(ctx, body, r.Header)
		switch {
		case errors.Is(err, provider.ErrWebhookNotJSON):
			s.writeError(w, r, errorf(http.StatusBadRequest, "malformed_json", "the body must be JSON"))
			return
		case err != nil:
			s.writeError(w, r, errorf(http.StatusBadRequest, "invalid_webhook", err.Error()))
			return
		}
		req = webhookRequest{EventID: ev.EventID, Type: ev.Type, Reference: ev.Reference, ProviderReference: ev.ProviderReference,
			Status: evidenceStatus(ev.Outcome)}
	} else if err := request.DecodeIgnoringUnknown(body, &req); err != nil {
		s.writeError(w, r, err)
		return
	} else if req.Status == ledger.EvidenceIgnored {
		s.writeError(w, r, request.FieldError("status", `must be "succeeded" or "failed"`))
		return
	}
	if err := req.validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	if problem := request.JSONBProblem(body); problem != "" {
		// Well signed, but not storable: a 400 says so, where the insert
		// would fail with a 500 on every redelivery.
		s.writeError(w, r, errorf(http.StatusBadRequest, "invalid_body", "the body "+problem))
		return
	}
	stored, err := s.cfg.Ledger.StoreWebhook(ctx, ledger.WebhookEvent{
		Provider: name, EventID: req.EventID, Type: req.Type, Reference: req.Reference,
		ProviderReference: req.ProviderReference, Status: req.Status, Payload: body,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(ctx, "webhook received", "provider", name, "event_id", req.EventID,
		"reference", req.Reference, "status", req.Status, "stored", stored)
	if !stored {
		writeJSON(w, http.StatusOK, map[string]bool{"stored": false, "duplicate": true})
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]bool{"stored": true})
}

// signatureHeaders names the headers of scheme for an error: "the X
// header is" or "the X, Y and Z headers are".
func signatureHeaders(names []string) string {
	switch len(names) {
	case 0:
		return "signature is"
	case 1:
		return names[0] + " header is"
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " headers are"
}

// evidenceStatus is the inbox's word for a webhook's outcome.
func evidenceStatus(o provider.WebhookOutcome) ledger.EvidenceStatus {
	switch o {
	case provider.WebhookSucceeded:
		return ledger.EvidenceSucceeded
	case provider.WebhookFailed:
		return ledger.EvidenceFailed
	}
	return ledger.EvidenceIgnored
}

// signatureFailure names why a signature was refused, for the log.
func signatureFailure(err error) string {
	switch {
	case errors.Is(err, webhook.ErrNoSecret):
		return "no_secret_configured"
	case errors.Is(err, webhook.ErrMissing):
		return "missing_header"
	case errors.Is(err, webhook.ErrMalformed):
		return "malformed_header"
	case errors.Is(err, webhook.ErrStale):
		return "stale_timestamp"
	case errors.Is(err, webhook.ErrMismatch):
		return "signature_mismatch"
	default:
		return "invalid"
	}
}

func (req webhookRequest) validate() error {
	switch {
	case req.EventID == "":
		return request.FieldError("event_id", "is required")
	case len(req.EventID) > maxEventIDLength || strings.ContainsRune(req.EventID, 0):
		return request.FieldError("event_id", "must be 1 to 1024 bytes of text")
	case req.Reference == "" && req.Status != ledger.EvidenceIgnored:
		return request.FieldError("reference", "is required")
	}
	for _, f := range []struct {
		name, value string
		max         int
	}{
		{"type", req.Type, request.MaxNameLength},
		{"reference", req.Reference, request.MaxReferenceLength},
		{"provider_reference", req.ProviderReference, request.MaxReferenceLength},
	} {
		if err := request.CheckText(f.name, f.value, f.max); err != nil {
			return err
		}
	}
	switch {
	case req.Status == ledger.EvidenceIgnored:
	case req.Status != ledger.EvidenceSucceeded && req.Status != ledger.EvidenceFailed:
		return request.FieldError("status", `must be "succeeded" or "failed"`)
	case req.Status == ledger.EvidenceSucceeded && req.ProviderReference == "":
		return request.FieldError("provider_reference", "is required when status is succeeded")
	}
	return nil
}
