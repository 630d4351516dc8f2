package api

import (
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/outbox"
)

type dispatchScope struct {
	Provider string `json:"provider"`
	Action   string `json:"action"`
}

// scope reads and checks a pause/resume body; an empty body means
// everything of the tenant.
func (s *Server) scope(w http.ResponseWriter, r *http.Request) (dispatchScope, error) {
	var sc dispatchScope
	if err := s.readJSON(w, r, &sc, true); err != nil {
		return sc, err
	}
	if sc.Action != "" {
		if _, ok := s.cfg.Actions[sc.Action]; !ok {
			return sc, errorf(http.StatusUnprocessableEntity, "unknown_action", "action "+sc.Action+" is not configured")
		}
	}
	if sc.Provider != "" && !s.knownProvider(sc.Provider) {
		return sc, errorf(http.StatusUnprocessableEntity, "unknown_provider", "provider "+sc.Provider+" is not configured")
	}
	return sc, nil
}

func (s *Server) knownProvider(name string) bool {
	for _, p := range s.cfg.Actions {
		if p == name {
			return true
		}
	}
	return false
}

// pauseDispatch is POST /v1/dispatch/pause: the stop button. Matching work
// stays queued; calls already in flight finish (GET /v1/dispatch lists
// them).
func (s *Server) pauseDispatch(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	sc, err := s.scope(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.cfg.Ledger.PauseDispatch(r.Context(), p.TenantID, sc.Provider, sc.Action, p.Actor()); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.WarnContext(r.Context(), "dispatch paused", "tenant", p.Tenant, "provider", sc.Provider, "action", sc.Action, "by", p.Name)
	s.writeDispatch(w, r, p, nil)
}

// resumeDispatch is POST /v1/dispatch/resume: removes every pause of the
// tenant that lies within the scope (an empty provider or action matches
// any, so {} clears them all) and hands the work they held back to the
// dispatcher: queued operations at once, retry_wait and unknown ones at
// their schedule. It is idempotent: with nothing paused it answers 200
// with removed 0, so an operator (or a script) may resume twice.
func (s *Server) resumeDispatch(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	sc, err := s.scope(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.cfg.Ledger.Now()
	released := 0
	removed, err := s.cfg.Ledger.ResumeDispatch(r.Context(), p.TenantID, sc.Provider, sc.Action, func(tx pgx.Tx, ops []ledger.Requeue) error {
		for _, op := range ops {
			if err := outbox.Insert(r.Context(), tx, op.Message(s.cfg.DispatchSubject(op.Provider), now)); err != nil {
				return err
			}
		}
		// Batches commit one by one; count what the committed ones
		// released (this one's commit follows).
		released += len(ops)
		return nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "dispatch resumed", "tenant", p.Tenant, "provider", sc.Provider, "action", sc.Action,
		"removed", removed, "released", released, "by", p.Name)
	s.writeDispatch(w, r, p, map[string]any{"removed": removed, "released": released})
}

type inFlightView struct {
	OperationID    string  `json:"operation_id"`
	Action         string  `json:"action"`
	Key            string  `json:"key"`
	Provider       string  `json:"provider"`
	LeaseOwner     string  `json:"lease_owner"`
	ClaimedAt      string  `json:"claimed_at"`
	AgeSeconds     float64 `json:"age_seconds"`
	LeaseExpiresAt *string `json:"lease_expires_at"`
	Attempts       int     `json:"attempts"`
}

// inFlightList names the cursors of GET /v1/dispatch.
const inFlightList = "in_flight"

// dispatchStatus is GET /v1/dispatch: active pauses and a page of what is
// in flight (oldest claim first), with its age, so an operator sees what
// may still land. The cursor pages in_flight; paused is whole (at most one
// entry per configured provider, action and their pairs).
func (s *Server) dispatchStatus(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	page, err := readPage(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var after ledger.Position
	given, err := page.decodeCursor(inFlightList, &after)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	afterPtr := &after
	if !given {
		afterPtr = nil
	}
	s.writeDispatchPage(w, r, p, afterPtr, page.limit, nil)
}

// writeDispatch answers with the tenant's dispatch state (the first page
// of in_flight) plus extra fields.
func (s *Server) writeDispatch(w http.ResponseWriter, r *http.Request, p auth.Principal, extra map[string]any) {
	s.writeDispatchPage(w, r, p, nil, DefaultPageLimit, extra)
}

func (s *Server) writeDispatchPage(w http.ResponseWriter, r *http.Request, p auth.Principal, after *ledger.Position, limit int, extra map[string]any) {
	pauses, err := s.cfg.Ledger.Pauses(r.Context(), p.TenantID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ops, err := s.cfg.Ledger.InFlight(r.Context(), p.TenantID, after, limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	next := ""
	if len(ops) > limit {
		ops = ops[:limit]
		last := ops[limit-1]
		next = encodeCursor(inFlightList, ledger.Position{At: last.UpdatedAt, ID: last.ID})
	}
	now := s.cfg.Ledger.Now()
	inFlight := make([]inFlightView, len(ops))
	for i, op := range ops {
		inFlight[i] = inFlightView{
			OperationID: op.ID.String(), Action: op.Action, Key: op.Key, Provider: op.Provider,
			LeaseOwner: deref(op.LeaseOwner), ClaimedAt: rfc3339(op.UpdatedAt),
			AgeSeconds: now.Sub(op.UpdatedAt).Round(time.Millisecond).Seconds(), LeaseExpiresAt: rfc3339Ptr(op.LeaseExpiresAt),
			Attempts: op.Attempts,
		}
	}
	pauseViews := make([]map[string]string, len(pauses))
	for i, pz := range pauses {
		pauseViews[i] = map[string]string{"provider": pz.Provider, "action": pz.Action, "paused_by": pz.PausedBy, "paused_at": rfc3339(pz.PausedAt)}
	}
	out := map[string]any{"paused": pauseViews, "in_flight": inFlight}
	for k, v := range extra {
		out[k] = v
	}
	writeJSON(w, http.StatusOK, pageOut(out, next))
}
