package api

import (
	"cmp"
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/request"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/view"
)

// createOperation is POST /v1/operations. Checks after auth run in the
// contract's order: size (413), JSON (400), action known (422), the other
// fields (400), the business key (422 when the params give none), existing
// key (200 replay / 409 conflict), params schema (422), approval (403).
// The action is looked up before the other fields are judged, so a client
// of an unconfigured action learns that first, whatever else it sent.
//
// An action with a business key keys the operation by it, whatever key
// the caller sent (kept as the client key), so the same intention under a
// new key is a replay or a conflict, never a second operation.
func (s *Server) createOperation(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	var req request.Operation
	if err := s.readJSON(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Action == "" {
		s.writeError(w, r, request.FieldError("action", "is required"))
		return
	}
	providerName, ok := s.actions[req.Action]
	if !ok {
		s.writeError(w, r, errorf(http.StatusUnprocessableEntity, "unknown_action", "action "+req.Action+" is not configured"))
		return
	}
	contract := s.contract(req.Action)
	approvalID, err := req.Validate(contract.HasBusinessKey())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req.Params = canonicalParams(req.Params)
	callerKey := ""
	if req.Key != nil {
		callerKey = *req.Key
	}
	key, clientKey, keyErr := contract.OperationKey(r.Context(), req.Params, p.Tenant, callerKey)
	switch schemaErr := contract.CheckParams(req.Params); {
	case keyErr != nil:
		// Params that give no business key can name no existing
		// operation; the schema's word on them, when it has one, is the
		// more precise.
		s.writeError(w, r, cmp.Or(schemaErr, keyErr))
		return
	case schemaErr != nil:
		// An existing key answers before the schema: a replay made under
		// an earlier, looser schema gets its operation (200), other params
		// a conflict (409); the ledger below judges which. Only a new key
		// is refused here.
		taken, lookupErr := s.keyTaken(r, p, req.Action, key, approvalID)
		if lookupErr != nil {
			s.writeError(w, r, lookupErr)
			return
		}
		if !taken {
			s.writeError(w, r, schemaErr)
			return
		}
	}
	if req.RequestApproval {
		s.createProposal(w, r, p, req, providerName, contract, key, clientKey)
		return
	}
	op, replayed, err := s.cfg.Ledger.Enqueue(r.Context(), ledger.EnqueueRequest{
		TenantID: p.TenantID, TokenID: p.TokenID, Scope: p.Scope, Actor: p.Actor(), Action: req.Action, Key: key, ClientKey: clientKey,
		Provider: providerName, Params: req.Params, ApprovalID: approvalID,
	})
	if err != nil {
		var approvalErr *ledger.ApprovalError
		if errors.As(err, &approvalErr) || errors.Is(err, ledger.ErrKeyConflict) || errors.Is(err, ledger.ErrKeyInUseElsewhere) {
			s.log.InfoContext(r.Context(), "operation refused", "tenant", p.Tenant, "action", req.Action, "key", key,
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
	s.log.InfoContext(r.Context(), "operation queued", "operation_id", op.ID, "tenant", p.Tenant, "action", op.Action, "key", op.Key)
	w.Header().Set("Location", "/v1/operations/"+op.ID.String())
	writeOperation(w, http.StatusCreated, op)
}

// keyTaken reports whether the tenant already has an operation of action
// under key, in any scope (keys are unique per tenant: another scope's is
// answered 409 key_in_use_elsewhere by the ledger); without a key the
// ledger keys the operation by its approval.
func (s *Server) keyTaken(r *http.Request, p auth.Principal, action, key string, approvalID uuid.UUID) (bool, error) {
	if key == "" && approvalID != uuid.Nil {
		key = approvalID.String()
	}
	if key == "" {
		return false, nil
	}
	return s.cfg.Ledger.KeyTaken(r.Context(), p.TenantID, action, key)
}

// findOperation is GET /v1/operations?action=A&key=K, or without action
// and key the list of the tenant's operations (listOperations).
func (s *Server) findOperation(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	q := r.URL.Query()
	action, key := q.Get("action"), q.Get("key")
	if !q.Has("action") && !q.Has("key") {
		s.listOperations(w, r, p)
		return
	}
	if action == "" || key == "" {
		s.writeError(w, r, errorf(http.StatusBadRequest, "invalid_query", "both action and key query parameters are required"))
		return
	}
	op, err := s.cfg.Ledger.GetByKey(r.Context(), p.Access(), action, key)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeOperation(w, http.StatusOK, op)
}

// eventsList names the cursors of GET /v1/operations/{id}/events.
const eventsList = "events"

// operationEvents is GET /v1/operations/{id}/events: a page of the
// operation's history, oldest first.
func (s *Server) operationEvents(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, errNotFound)
		return
	}
	page, err := readPage(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var afterSeq int64
	if _, err := page.decodeCursor(eventsList, &afterSeq); err != nil {
		s.writeError(w, r, err)
		return
	}
	events, err := s.cfg.Ledger.EventsPage(r.Context(), p.Access(), id, afterSeq, page.limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	next := ""
	if len(events) > page.limit {
		events = events[:page.limit]
		next = encodeCursor(eventsList, events[len(events)-1].Seq)
	}
	views := make([]view.Event, len(events))
	for i, e := range events {
		views[i] = viewEvent(e, p)
	}
	writeJSON(w, http.StatusOK, pageOut(map[string]any{"events": views}, next))
}
