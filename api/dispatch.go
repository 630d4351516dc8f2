package api

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/ledger"
)

// DispatchScope is what a pause or resume covers: an empty provider or
// action matches any, so the zero scope is everything of the tenant.
type DispatchScope struct {
	Provider string `json:"provider"`
	Action   string `json:"action"`
}

// checkScope refuses a scope naming an action or provider that is not
// configured.
func (s *Server) checkScope(sc DispatchScope) error {
	if sc.Action != "" {
		if _, ok := s.actions[sc.Action]; !ok {
			return errorf(http.StatusUnprocessableEntity, "unknown_action", "action "+sc.Action+" is not configured")
		}
	}
	if sc.Provider != "" && !s.knownProvider(sc.Provider) {
		return errorf(http.StatusUnprocessableEntity, "unknown_provider", "provider "+sc.Provider+" is not configured")
	}
	return nil
}

func (s *Server) knownProvider(name string) bool {
	for _, p := range s.actions {
		if p == name {
			return true
		}
	}
	return false
}

// Scopes lists the configured actions and providers, sorted: what a pause
// may name.
func (s *Server) Scopes() (actions, providers []string) {
	for a, p := range s.actions {
		actions = append(actions, a)
		if !slices.Contains(providers, p) {
			providers = append(providers, p)
		}
	}
	slices.Sort(actions)
	slices.Sort(providers)
	return actions, providers
}

// pauseDispatch is POST /v1/dispatch/pause.
func (s *Server) pauseDispatch(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	var sc DispatchScope
	if err := s.readJSON(w, r, &sc, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.PauseDispatch(r.Context(), p, sc); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeDispatch(w, r, p, nil)
}

// PauseDispatch is the stop button: matching work of the principal's
// tenant stays queued; calls already in flight finish (DispatchState
// lists them).
func (s *Server) PauseDispatch(ctx context.Context, p auth.Principal, sc DispatchScope) error {
	if err := s.checkScope(sc); err != nil {
		return err
	}
	if err := s.cfg.Ledger.PauseDispatch(ctx, p.Access(), sc.Provider, sc.Action, p.Actor()); err != nil {
		return err
	}
	s.log.WarnContext(ctx, "dispatch paused", "tenant", p.Tenant, "provider", sc.Provider, "action", sc.Action, "by", p.Actor())
	return nil
}

// resumeDispatch is POST /v1/dispatch/resume.
func (s *Server) resumeDispatch(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	var sc DispatchScope
	if err := s.readJSON(w, r, &sc, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	removed, released, err := s.ResumeDispatch(r.Context(), p, sc)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeDispatch(w, r, p, map[string]any{"removed": removed, "released": released})
}

// ResumeDispatch removes every pause of the principal's tenant that lies
// within the scope and hands the work they held back to the dispatcher:
// queued operations at once, retry_wait and unknown ones at their
// schedule. It is idempotent: with nothing paused it removes 0, so an
// operator (or a script) may resume twice.
func (s *Server) ResumeDispatch(ctx context.Context, p auth.Principal, sc DispatchScope) (removed, released int, err error) {
	if err := s.checkScope(sc); err != nil {
		return 0, 0, err
	}
	removed, released, err = s.cfg.Ledger.ResumeDispatch(ctx, p.Access(), sc.Provider, sc.Action)
	if err != nil {
		return 0, 0, err
	}
	s.log.InfoContext(ctx, "dispatch resumed", "tenant", p.Tenant, "provider", sc.Provider, "action", sc.Action,
		"removed", removed, "released", released, "by", p.Actor())
	return removed, released, nil
}

type inFlightView struct {
	OperationID    string  `json:"operation_id"`
	Action         string  `json:"action"`
	Key            string  `json:"key"`
	ClientKey      string  `json:"client_key,omitempty"`
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
	limit, afterPtr, err := readPageAfter[ledger.Position](r, inFlightList)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeDispatchPage(w, r, p, afterPtr, limit, nil)
}

// writeDispatch answers with the tenant's dispatch state (the first page
// of in_flight) plus extra fields.
func (s *Server) writeDispatch(w http.ResponseWriter, r *http.Request, p auth.Principal, extra map[string]any) {
	s.writeDispatchPage(w, r, p, nil, DefaultPageLimit, extra)
}

func (s *Server) writeDispatchPage(w http.ResponseWriter, r *http.Request, p auth.Principal, after *ledger.Position, limit int, extra map[string]any) {
	pauses, ops, nextPos, err := s.DispatchState(r.Context(), p, after, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	next := ""
	if nextPos != nil {
		next = encodeCursor(inFlightList, *nextPos)
	}
	now := s.cfg.Ledger.Now()
	inFlight := make([]inFlightView, len(ops))
	for i, op := range ops {
		inFlight[i] = inFlightView{
			OperationID: op.ID.String(), Action: op.Action, Key: op.Key, ClientKey: deref(op.ClientKey), Provider: op.Provider,
			LeaseOwner: deref(op.LeaseOwner), ClaimedAt: rfc3339(op.UpdatedAt),
			AgeSeconds: now.Sub(op.UpdatedAt).Round(time.Millisecond).Seconds(), LeaseExpiresAt: rfc3339Ptr(op.LeaseExpiresAt),
			Attempts: op.Attempts,
		}
	}
	pauseViews := make([]map[string]string, len(pauses))
	for i, pz := range pauses {
		pauseViews[i] = map[string]string{"provider": pz.Provider, "action": pz.Action, "paused_by": pz.PausedBy, "paused_at": rfc3339(pz.PausedAt)}
		if pz.Reason != "" {
			pauseViews[i]["reason"], pauseViews[i]["detail"] = pz.Reason, pz.Detail
		}
	}
	circuits, err := s.Circuits(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	circuitViews := make([]map[string]any, len(circuits))
	for i, c := range circuits {
		circuitViews[i] = map[string]any{"provider": c.Provider, "open": c.Open(), "failures": c.Failures,
			"opened_at": rfc3339Ptr(c.OpenedAt), "probe_at": rfc3339Ptr(c.ProbeAt)}
	}
	out := map[string]any{"paused": pauseViews, "in_flight": inFlight, "circuits": circuitViews}
	for k, v := range extra {
		out[k] = v
	}
	writeJSON(w, http.StatusOK, pageOut(out, next))
}

// Circuits returns the circuit breakers of the configured providers that
// have failures (open, or counting toward opening). A circuit is a
// provider's, not a tenant's: every operator sees that a supplier is out.
func (s *Server) Circuits(ctx context.Context) ([]ledger.Circuit, error) {
	all, err := s.cfg.Ledger.Circuits(ctx)
	if err != nil {
		return nil, err
	}
	var configured []ledger.Circuit
	for _, c := range all {
		if _, ok := s.cfg.Registry.Provider(c.Provider); ok {
			configured = append(configured, c)
		}
	}
	return configured, nil
}

// DispatchState returns the principal's tenant's active pauses and a page
// of its calls in flight (oldest claim first) after the position after
// (nil: from the oldest), with the position of the next page (nil when
// this is the last).
func (s *Server) DispatchState(ctx context.Context, p auth.Principal, after *ledger.Position, limit int) ([]ledger.Pause, []ledger.Operation, *ledger.Position, error) {
	pauses, err := s.cfg.Ledger.Pauses(ctx, p.TenantID)
	if err != nil {
		return nil, nil, nil, err
	}
	ops, err := s.cfg.Ledger.InFlight(ctx, p.Access(), after, limit+1)
	if err != nil {
		return nil, nil, nil, err
	}
	var next *ledger.Position
	if len(ops) > limit {
		ops = ops[:limit]
		last := ops[limit-1]
		next = &ledger.Position{At: last.UpdatedAt, ID: last.ID}
	}
	return pauses, ops, next, nil
}
