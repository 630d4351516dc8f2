package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/request"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/reconciler"
	"github.com/actledger/actledger/view"
)

// reviewList names the cursors of GET /v1/review.
const reviewList = "review"

// listReview is GET /v1/review: a page of the tenant's open review items,
// operations in review (longest waiting first), then unmatched evidence.
func (s *Server) listReview(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	limit, afterPtr, err := readPageAfter[reconciler.ReviewCursor](r, reviewList)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	items, next, err := s.cfg.Reconciler.ReviewPage(r.Context(), p.Access(), afterPtr, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	nextCursor := ""
	if next != nil {
		nextCursor = encodeCursor(reviewList, next)
	}
	writeJSON(w, http.StatusOK, pageOut(map[string]any{"items": items}, nextCursor))
}

// resolveOperation is POST /v1/operations/{id}/resolve.
func (s *Server) resolveOperation(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, errNotFound)
		return
	}
	var res reconciler.Resolution
	if err := s.readJSON(w, r, &res, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	op, comp, err := s.ResolveOperation(r.Context(), p, id, res)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := resolvedView{Operation: view.OfOperation(op)}
	if comp != nil {
		v := view.OfOperation(*comp)
		out.Compensation = &v
	}
	// The answer is the resolved operation's view (with its compensation):
	// its ETag is the resolved operation's.
	w.Header().Set("ETag", etag(op))
	writeJSON(w, http.StatusOK, out)
}

// ResolveOperation settles operation id of the principal's tenant as the
// operator decides, after checking the resolution's free text; the
// reconciler judges the decision itself. It returns the operation and,
// with a compensation, the new linked one.
func (s *Server) ResolveOperation(ctx context.Context, p auth.Principal, id uuid.UUID, res reconciler.Resolution) (ledger.Operation, *ledger.Operation, error) {
	if s.cfg.Reconciler == nil {
		return ledger.Operation{}, nil, errNotFound
	}
	if err := validateResolution(res); err != nil {
		return ledger.Operation{}, nil, err
	}
	return s.cfg.Reconciler.Resolve(ctx, p.Access(), p.TokenID, p.Actor(), id, res)
}

// validateResolution checks the free text of a resolution and its
// compensation; the reconciler judges the decision itself.
func validateResolution(res reconciler.Resolution) error {
	if err := request.CheckText("outcome", res.Outcome, request.MaxNameLength); err != nil {
		return err
	}
	if err := request.CheckText("provider_reference", res.ProviderReference, request.MaxReferenceLength); err != nil {
		return err
	}
	if err := request.CheckText("note", res.Note, request.MaxNoteLength); err != nil {
		return err
	}
	if c := res.Compensation; c != nil {
		if err := request.CheckText("compensation.action", c.Action, request.MaxNameLength); err != nil {
			return err
		}
		if c.Key != "" {
			if err := request.CheckKey("compensation.key", c.Key); err != nil {
				return err
			}
		}
		if err := request.CheckParams("compensation.params", c.Params); err != nil {
			return err
		}
	}
	return nil
}

// resolvedView is the answer of a resolve: the operation as GET
// /v1/operations/{id} shows it (so resolve and retry answer alike), plus
// the linked compensation operation when the resolution created one.
type resolvedView struct {
	view.Operation
	Compensation *view.Operation `json:"compensation,omitempty"`
}

// resolveEvidence is POST /v1/review/evidence/{id}/resolve.
func (s *Server) resolveEvidence(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		s.writeError(w, r, errNotFound)
		return
	}
	var req struct {
		Note string `json:"note"`
	}
	if err := s.readJSON(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.ResolveEvidence(r.Context(), p, id, req.Note); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"evidence_id": id, "resolved": true})
}

// ResolveEvidence closes unmatched-evidence item id of the principal's
// tenant with a note.
func (s *Server) ResolveEvidence(ctx context.Context, p auth.Principal, id int64, note string) error {
	if s.cfg.Reconciler == nil {
		return errNotFound
	}
	if err := request.CheckText("note", note, request.MaxNoteLength); err != nil {
		return err
	}
	return s.cfg.Reconciler.ResolveEvidence(ctx, p.Access(), p.Actor(), id, note)
}

// retryOperation is POST /v1/operations/{id}/retry.
func (s *Server) retryOperation(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, errNotFound)
		return
	}
	var req struct {
		Note string `json:"note"`
	}
	if err := s.readJSON(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	op, err := s.RetryOperation(r.Context(), p, id, req.Note)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeOperation(w, http.StatusOK, op)
}

// RetryOperation sends operation id of the principal's tenant again with
// its original external key, when the reconciler finds that safe.
func (s *Server) RetryOperation(ctx context.Context, p auth.Principal, id uuid.UUID, note string) (ledger.Operation, error) {
	if s.cfg.Reconciler == nil {
		return ledger.Operation{}, errNotFound
	}
	if err := request.CheckText("note", note, request.MaxNoteLength); err != nil {
		return ledger.Operation{}, err
	}
	return s.cfg.Reconciler.Retry(ctx, p.Access(), p.Actor(), id, note)
}

type replayRequest struct {
	// Since is an RFC 3339 time or a duration back from now ("24h").
	Since  string `json:"since"`
	Reason string `json:"reason"`
	DryRun bool   `json:"dry_run"`
}

// replayReview is POST /v1/review/replay: re-reads the review stream and
// re-runs reconciliation for each open item. The answer is NDJSON, one line
// per item as it is done ({"item":…}), then {"summary":…}, so a long replay
// shows progress.
func (s *Server) replayReview(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	var req replayRequest
	if err := s.readJSON(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := request.CheckText("reason", req.Reason, request.MaxNameLength); err != nil {
		s.writeError(w, r, err)
		return
	}
	opts := reconciler.ReplayOptions{Reason: ledger.ReviewReason(req.Reason), DryRun: req.DryRun}
	if req.Since != "" {
		if t, err := time.Parse(time.RFC3339, req.Since); err == nil {
			opts.Since = t
		} else if d, err := time.ParseDuration(req.Since); err == nil && d > 0 {
			opts.Since = s.cfg.Ledger.Now().Add(-d)
		} else {
			s.writeError(w, r, request.FieldError("since", "must be an RFC 3339 time or a duration such as 24h"))
			return
		}
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	sum, err := s.cfg.Reconciler.Replay(r.Context(), p.Access(), p.Tenant, opts, func(item reconciler.ReplayItem) {
		_ = enc.Encode(map[string]any{"item": item})
		if flusher != nil {
			flusher.Flush()
		}
	})
	if err != nil {
		s.log.ErrorContext(r.Context(), "replay failed", "tenant", p.Tenant, "err", err)
		e := toAPIError(err)
		_ = enc.Encode(map[string]any{"error": map[string]string{"code": e.Code, "message": e.Message}})
		return
	}
	s.log.InfoContext(r.Context(), "replay done", "tenant", p.Tenant, "items", sum.Items, "changed", sum.Changed, "dry_run", sum.DryRun)
	_ = enc.Encode(map[string]any{"summary": sum})
}
