package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/action"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/request"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/metrics"
)

// contract returns the contract of the action named name, or a contract
// with the defaults (any params, every proposal waits for a person) for an
// action the registry no longer names: a proposal made before the
// providers file dropped it is still listed, and decided with the default
// TTLs.
func (s *Server) contract(name string) *action.Contract {
	if c, ok := s.cfg.Registry.Action(name); ok {
		return c
	}
	return &action.Contract{Name: name, Approval: action.ApprovalPolicy{
		RequestTTL:    action.DefaultRequestTTL,
		ApprovalTTL:   action.DefaultApprovalTTL,
		PolicyVersion: action.DefaultPolicyVersion,
	}}
}

// decided tells the metrics hook about a decision.
func (s *Server) decided(outcome metrics.ApprovalOutcome) {
	if s.cfg.OnApprovalDecision != nil {
		s.cfg.OnApprovalDecision(outcome)
	}
}

// createProposal is POST /v1/operations with "request_approval": true,
// after the checks every operation request passes. The action's policy is
// asked first (outside any transaction: it only reads the request); its
// yes approves the proposal in the transaction that stores it (201
// queued), anything else leaves it to a person (202 awaiting_approval). An
// evaluation error never approves.
//
// key is the proposal's key (the caller's, or the action's business key)
// and clientKey the caller's when the key is the business key.
func (s *Server) createProposal(w http.ResponseWriter, r *http.Request, p auth.Principal, req request.Operation, providerName string,
	contract *action.Contract, key, clientKey string) {
	ctx := r.Context()
	var auto *ledger.Decision
	if contract.HasPolicy() {
		approved, err := contract.AutoApprove(ctx, req.Params, p.Tenant)
		switch {
		case err != nil:
			s.log.WarnContext(ctx, "auto_approve policy failed; the proposal waits for a person",
				"tenant", p.Tenant, "action", req.Action, "key", key, "err", err)
		case approved:
			target := s.targets[providerName]
			auto = &ledger.Decision{
				Approver: contract.PolicyApprover(), PolicyVersion: contract.Approval.PolicyVersion,
				TTL: contract.Approval.ApprovalTTL, Target: &target,
			}
		}
	}
	reason := ""
	if req.Reason != nil {
		reason = *req.Reason
	}
	op, replayed, err := s.cfg.Ledger.Propose(ctx, ledger.ProposeRequest{
		TenantID: p.TenantID, TokenID: p.TokenID, Scope: p.Scope, Actor: p.Actor(), Action: req.Action, Key: key, ClientKey: clientKey,
		Provider: providerName, Params: req.Params, Reason: reason,
		RequestTTL: contract.Approval.RequestTTL, AutoApproval: auto,
	})
	if err != nil {
		if errors.Is(err, ledger.ErrKeyConflict) || errors.Is(err, ledger.ErrKeyInUseElsewhere) {
			s.log.InfoContext(ctx, "proposal refused", "tenant", p.Tenant, "action", req.Action, "key", key,
				"client_key", clientKey, "reason", err.Error())
		}
		s.writeError(w, r, err)
		return
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
		writeOperation(w, http.StatusOK, op)
		return
	}
	w.Header().Set("Location", "/v1/operations/"+op.ID.String())
	if op.Status == ledger.StatusQueued {
		s.decided(metrics.ApprovedByPolicy)
		s.log.InfoContext(ctx, "proposal approved by policy", "operation_id", op.ID, "tenant", p.Tenant,
			"action", op.Action, "key", op.Key, "approver", auto.Approver)
		writeOperation(w, http.StatusCreated, op)
		return
	}
	s.log.InfoContext(ctx, "proposal awaits approval", "operation_id", op.ID, "tenant", p.Tenant, "action", op.Action, "key", op.Key)
	writeOperation(w, http.StatusAccepted, op)
}

// ApprovalRequest is one item of GET /v1/approval-requests (and a row of
// the console's approval requests page): what an approver needs to
// decide, the params in full and their fingerprint.
type ApprovalRequest struct {
	OperationID uuid.UUID `json:"operation_id"`
	Action      string    `json:"action"`
	Description string    `json:"description,omitempty"`
	Key         string    `json:"key"`
	ClientKey   string    `json:"client_key,omitempty"`
	// Scope is the access scope of the token that proposed it; empty when
	// that token had none.
	Scope             string          `json:"scope,omitempty"`
	Params            json.RawMessage `json:"params"`
	ParamsFingerprint string          `json:"params_fingerprint"`
	Reason            string          `json:"reason"`
	RequestedBy       string          `json:"requested_by"`
	Provider          string          `json:"provider"`
	Account           string          `json:"account"`
	Environment       string          `json:"environment"`
	AgeSeconds        int64           `json:"age_seconds"`
	CreatedAt         string          `json:"created_at"`
	ExpiresAt         *string         `json:"expires_at"`
	Summary           string          `json:"summary"`
}

// approvalRequestsList names the cursors of GET /v1/approval-requests.
const approvalRequestsList = "approval-requests"

// listApprovalRequests is GET /v1/approval-requests: a page of the
// tenant's open proposals, oldest first.
func (s *Server) listApprovalRequests(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	limit, afterPtr, err := readPageAfter[ledger.AwaitingCursor](r, approvalRequestsList)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	items, nextPos, err := s.ApprovalRequests(r.Context(), p, afterPtr, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	next := ""
	if nextPos != nil {
		next = encodeCursor(approvalRequestsList, *nextPos)
	}
	writeJSON(w, http.StatusOK, pageOut(map[string]any{"items": items}, next))
}

// ApprovalRequests returns at most limit of the principal's tenant's open
// proposals after the position after (nil: from the oldest), oldest
// first, and the position of the next page (nil when this is the last).
func (s *Server) ApprovalRequests(ctx context.Context, p auth.Principal, after *ledger.AwaitingCursor, limit int) ([]ApprovalRequest, *ledger.AwaitingCursor, error) {
	reqs, err := s.cfg.Ledger.AwaitingPage(ctx, p.Access(), after, limit+1)
	if err != nil {
		return nil, nil, err
	}
	var next *ledger.AwaitingCursor
	if len(reqs) > limit {
		reqs = reqs[:limit]
		last := reqs[len(reqs)-1]
		next = &ledger.AwaitingCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	now := s.cfg.Ledger.Now()
	items := make([]ApprovalRequest, len(reqs))
	for i, req := range reqs {
		v := ApprovalRequest{
			OperationID: req.ID, Action: req.Action, Key: req.Key, ClientKey: deref(req.ClientKey), Scope: deref(req.Scope), Params: req.Params,
			ParamsFingerprint: req.ParamsFingerprint, Reason: deref(req.RequestReason),
			RequestedBy: req.RequestedByName, Provider: req.Provider,
			AgeSeconds: int64(now.Sub(req.CreatedAt) / time.Second), CreatedAt: rfc3339(req.CreatedAt),
			ExpiresAt: rfc3339Ptr(req.RequestExpiresAt), Summary: req.Summary(),
		}
		v.Description = s.contract(req.Action).Description
		if pc, ok := s.cfg.Registry.Provider(req.Provider); ok {
			v.Account, v.Environment = pc.Account, pc.Environment
		}
		items[i] = v
	}
	return items, next, nil
}

// Approve is an approver's decision to approve a proposal: the
// fingerprint they were shown, and optionally a policy version, a TTL and
// a note (zero values: the action's defaults, no note).
type Approve struct {
	ParamsFingerprint string  `json:"params_fingerprint"`
	PolicyVersion     *string `json:"policy_version"`
	TTLSeconds        *int64  `json:"ttl_seconds"`
	Note              *string `json:"note"`
}

// approveOperation is POST /v1/operations/{id}/approve.
func (s *Server) approveOperation(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, errNotFound)
		return
	}
	var req Approve
	if err := s.readJSON(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	op, err := s.ApproveProposal(r.Context(), p, id, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeOperation(w, http.StatusOK, op)
}

// ApproveProposal approves proposal id of the principal's tenant: the
// approver echoes the fingerprint they were shown, and in one transaction
// an approval bound to the proposal is created and used, and the proposal
// is queued with its dispatch message. A proposal decided elsewhere or
// whose fingerprint is not the one shown is refused
// (ledger.ErrNotAwaitingApproval, ledger.ErrFingerprintMismatch); nothing
// changes then.
func (s *Server) ApproveProposal(ctx context.Context, p auth.Principal, id uuid.UUID, req Approve) (ledger.Operation, error) {
	if req.ParamsFingerprint == "" {
		return ledger.Operation{}, request.FieldError("params_fingerprint", "is required: echo the fingerprint of the params you approve")
	}
	if err := request.CheckText("params_fingerprint", req.ParamsFingerprint, request.MaxNameLength); err != nil {
		return ledger.Operation{}, err
	}
	note := ""
	if req.Note != nil {
		if err := request.CheckText("note", *req.Note, request.MaxNoteLength); err != nil {
			return ledger.Operation{}, err
		}
		note = *req.Note
	}
	if req.TTLSeconds != nil && (*req.TTLSeconds < 1 || *req.TTLSeconds > int64(MaxApprovalTTL/time.Second)) {
		return ledger.Operation{}, request.FieldError("ttl_seconds", fmt.Sprintf("must be 1 to %d (one year)", int64(MaxApprovalTTL/time.Second)))
	}
	if req.PolicyVersion != nil {
		if err := request.CheckText("policy_version", *req.PolicyVersion, request.MaxNameLength); err != nil {
			return ledger.Operation{}, err
		}
	}
	// The TTL and policy version default to the action's; the action is
	// the operation's, read under the decision's lock, so they are chosen
	// there.
	missingProvider := ""
	decide := func(op ledger.Operation) ledger.Decision {
		contract := s.contract(op.Action)
		// Bound to the account and environment the operation's provider
		// points at now: the dispatcher holds it if that changes. A
		// provider the providers file no longer names has none, and the
		// ledger grants nothing (ledger.ErrNoTarget).
		target, ok := s.targets[op.Provider]
		if !ok {
			missingProvider = op.Provider
		}
		d := ledger.Decision{
			ApproverTokenID: p.TokenID, Approver: p.Actor(), Fingerprint: req.ParamsFingerprint,
			PolicyVersion: contract.Approval.PolicyVersion, TTL: contract.Approval.ApprovalTTL, Note: note,
		}
		if ok {
			d.Target = &target
		}
		if req.PolicyVersion != nil && *req.PolicyVersion != "" {
			d.PolicyVersion = *req.PolicyVersion
		}
		if d.PolicyVersion == "" {
			d.PolicyVersion = action.DefaultPolicyVersion
		}
		if req.TTLSeconds != nil {
			d.TTL = time.Duration(*req.TTLSeconds) * time.Second
		}
		return d
	}
	op, approval, err := s.cfg.Ledger.Approve(ctx, p.Access(), id, decide)
	if errors.Is(err, ledger.ErrNoTarget) && missingProvider != "" {
		// The proposal was made before the providers file dropped its
		// provider: a configuration to fix (or a proposal to deny), not
		// an internal error.
		s.log.WarnContext(ctx, "approval refused: the proposal's provider is not configured", "operation_id", id,
			"tenant", p.Tenant, "provider", missingProvider)
		return op, errorf(http.StatusUnprocessableEntity, "unknown_provider",
			"provider "+missingProvider+" of this proposal is not configured, so no approval can be bound to its account and environment; nothing changed")
	}
	if err != nil {
		if errors.Is(err, ledger.ErrNotAwaitingApproval) || errors.Is(err, ledger.ErrFingerprintMismatch) {
			s.log.InfoContext(ctx, "approval refused", "operation_id", id, "tenant", p.Tenant, "reason", err.Error())
		}
		return op, err
	}
	s.decided(metrics.ApprovedByPerson)
	s.log.InfoContext(ctx, "proposal approved", "operation_id", op.ID, "tenant", p.Tenant, "action", op.Action,
		"approval_id", approval.ID, "by", p.Actor())
	return op, nil
}

type denyRequest struct {
	Reason string `json:"reason"`
}

// denyOperation is POST /v1/operations/{id}/deny.
func (s *Server) denyOperation(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, errNotFound)
		return
	}
	var req denyRequest
	if err := s.readJSON(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	op, err := s.DenyProposal(r.Context(), p, id, req.Reason)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeOperation(w, http.StatusOK, op)
}

// DenyProposal cancels proposal id of the principal's tenant with the
// approver's reason (required: the agent and its user are told why);
// nothing was sent.
func (s *Server) DenyProposal(ctx context.Context, p auth.Principal, id uuid.UUID, reason string) (ledger.Operation, error) {
	if reason == "" {
		return ledger.Operation{}, request.FieldError("reason", "is required: the agent and its user are told why")
	}
	if err := request.CheckText("reason", reason, request.MaxNoteLength); err != nil {
		return ledger.Operation{}, err
	}
	op, err := s.cfg.Ledger.Deny(ctx, p.Access(), id, p.Actor(), reason)
	if err != nil {
		return op, err
	}
	s.decided(metrics.Denied)
	s.log.InfoContext(ctx, "proposal denied", "operation_id", op.ID, "tenant", p.Tenant, "action", op.Action, "by", p.Actor())
	return op, nil
}
