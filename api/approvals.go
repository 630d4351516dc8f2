package api

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/request"
	"github.com/actledger/actledger/ledger"
)

// MaxApprovalTTL is the longest an approval may stand: one year. An
// approval is a person's decision about specific params now; one that
// outlives a year of policy changes is a standing grant, which this is not.
const MaxApprovalTTL = 365 * 24 * time.Hour

type createApprovalRequest struct {
	Action        string          `json:"action"`
	Params        json.RawMessage `json:"params"`
	ExpiresAt     *string         `json:"expires_at"`
	TTLSeconds    *int64          `json:"ttl_seconds"`
	PolicyVersion string          `json:"policy_version"`
	MaxUses       *int            `json:"max_uses"`
}

// createApproval is POST /v1/approvals.
func (s *Server) createApproval(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	var req createApprovalRequest
	if err := s.readJSON(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	expires, err := req.validate(s.cfg.Ledger.Now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req.Params = canonicalParams(req.Params)
	target, ok := s.actionTarget(req.Action)
	if !ok {
		s.writeError(w, r, errorf(http.StatusUnprocessableEntity, "unknown_action", "action "+req.Action+" is not configured"))
		return
	}
	if err := s.contract(req.Action).CheckParams(req.Params); err != nil {
		s.writeError(w, r, err)
		return
	}
	maxUses := 1
	if req.MaxUses != nil {
		maxUses = *req.MaxUses
	}
	a, err := s.cfg.Ledger.CreateApproval(r.Context(), ledger.NewApproval{
		TenantID: p.TenantID, ApproverTokenID: p.TokenID, Scope: p.Scope, Action: req.Action, Params: req.Params,
		PolicyVersion: req.PolicyVersion, ExpiresAt: expires, MaxUses: maxUses, Target: &target,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "approval granted", "approval_id", a.ID, "tenant", p.Tenant, "action", a.Action, "approver", p.Name,
		"account", target.Account, "environment", target.Environment)
	writeJSON(w, http.StatusCreated, viewApproval(a))
}

// actionTarget returns the provider account and environment action points
// at now: what an approval of it is bound to. ok is false for an action
// that is not configured.
func (s *Server) actionTarget(action string) (ledger.Target, bool) {
	provider, ok := s.actions[action]
	if !ok {
		return ledger.Target{}, false
	}
	target, ok := s.targets[provider]
	return target, ok
}

func (req createApprovalRequest) validate(now time.Time) (time.Time, error) {
	if req.Action == "" {
		return time.Time{}, request.FieldError("action", "is required")
	}
	if err := request.CheckParams("params", req.Params); err != nil {
		return time.Time{}, err
	}
	if req.PolicyVersion == "" {
		return time.Time{}, request.FieldError("policy_version", "is required")
	}
	if err := request.CheckText("policy_version", req.PolicyVersion, request.MaxNameLength); err != nil {
		return time.Time{}, err
	}
	// The ledger stores max_uses as a Postgres integer: a larger count
	// would fail the insert (a 500) instead of naming the field.
	if req.MaxUses != nil && (*req.MaxUses < 1 || *req.MaxUses > math.MaxInt32) {
		return time.Time{}, request.FieldError("max_uses", fmt.Sprintf("must be 1 to %d", math.MaxInt32))
	}
	var expires time.Time
	switch {
	case req.ExpiresAt != nil && req.TTLSeconds != nil:
		return time.Time{}, request.FieldError("expires_at", "give expires_at or ttl_seconds, not both")
	case req.ExpiresAt != nil:
		t, err := time.Parse(time.RFC3339, *req.ExpiresAt)
		if err != nil {
			return time.Time{}, request.FieldError("expires_at", "must be an RFC 3339 time")
		}
		if t.After(now.Add(MaxApprovalTTL)) {
			return time.Time{}, request.FieldError("expires_at", "must be at most one year from now")
		}
		expires = t
	case req.TTLSeconds != nil:
		// Checked before any arithmetic: a huge ttl_seconds times
		// time.Second overflows int64 and can wrap to a short, valid-looking
		// expiry.
		if *req.TTLSeconds < 1 || *req.TTLSeconds > int64(MaxApprovalTTL/time.Second) {
			return time.Time{}, request.FieldError("ttl_seconds", fmt.Sprintf("must be 1 to %d (one year)", int64(MaxApprovalTTL/time.Second)))
		}
		expires = now.Add(time.Duration(*req.TTLSeconds) * time.Second)
	default:
		return time.Time{}, request.FieldError("expires_at", "expires_at or ttl_seconds is required")
	}
	if !expires.After(now) {
		return time.Time{}, request.FieldError("expires_at", "must be in the future")
	}
	return expires.UTC(), nil
}

// revokeApproval is POST /v1/approvals/{id}/revoke.
func (s *Server) revokeApproval(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, errNotFound)
		return
	}
	a, held, err := s.cfg.Ledger.RevokeApproval(r.Context(), p.Access(), id, p.Actor())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ids := make([]uuid.UUID, len(held))
	for i, op := range held {
		ids[i] = op.ID
	}
	s.log.InfoContext(r.Context(), "approval revoked", "approval_id", a.ID, "tenant", p.Tenant, "held", len(ids))
	writeJSON(w, http.StatusOK, map[string]any{"approval": viewApproval(a), "held_operations": ids})
}
