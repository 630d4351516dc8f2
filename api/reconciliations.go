package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/request"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/statement"
)

// reconciliationsList names the cursors of GET /v1/reconciliations.
const reconciliationsList = "reconciliations"

// statementRunBudget bounds POST /v1/reconciliations: a run over a large
// window reads many pages, each bounded by the provider's timeout.
const statementRunBudget = 10 * time.Minute

// reconciliationView is a statement run as the API shows it.
type reconciliationView struct {
	ID         string           `json:"id"`
	Provider   string           `json:"provider"`
	Since      string           `json:"since"`
	Until      string           `json:"until"`
	StartedAt  string           `json:"started_at"`
	FinishedAt *string          `json:"finished_at"`
	Status     ledger.RunStatus `json:"status"`
	Actor      string           `json:"actor"`
	Pages      int              `json:"pages"`
	Error      *string          `json:"error"`
	Findings   map[string]int64 `json:"findings"`
}

func viewReconciliation(run ledger.StatementRun) reconciliationView {
	findings := make(map[string]int64, len(ledger.Findings))
	for _, f := range ledger.Findings {
		findings[string(f)] = run.Findings[f]
	}
	return reconciliationView{
		ID: run.ID.String(), Provider: run.Provider, Since: rfc3339(run.Since), Until: rfc3339(run.Until),
		StartedAt: rfc3339(run.StartedAt), FinishedAt: rfc3339Ptr(run.FinishedAt), Status: run.Status,
		Actor: run.Actor, Pages: run.Pages, Error: run.Error, Findings: findings,
	}
}

// findingView is one record or operation a run says needs a person.
type findingView struct {
	Finding           ledger.Finding `json:"finding"`
	OperationID       *string        `json:"operation_id"`
	Reference         *string        `json:"reference"`
	ProviderReference *string        `json:"provider_reference"`
	Created           *string        `json:"created"`
	Skipped           *string        `json:"skipped"`
}

// listReconciliations is GET /v1/reconciliations: the tenant's statement
// runs, newest first. Runs cover every scope, so a scoped token sees none.
func (s *Server) listReconciliations(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	limit, after, err := readPageAfter[ledger.Position](r, reconciliationsList)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	runs, err := s.cfg.Ledger.StatementRuns(r.Context(), p.Access(), after, limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	next := ""
	if len(runs) > limit {
		runs = runs[:limit]
		last := runs[len(runs)-1]
		next = encodeCursor(reconciliationsList, ledger.Position{At: last.StartedAt, ID: last.ID})
	}
	views := make([]reconciliationView, len(runs))
	for i, run := range runs {
		views[i] = viewReconciliation(run)
	}
	writeJSON(w, http.StatusOK, pageOut(map[string]any{"reconciliations": views}, next))
}

type reconcileRequest struct {
	Provider string     `json:"provider"`
	Since    *time.Time `json:"since"`
	Until    *time.Time `json:"until"`
	DryRun   bool       `json:"dry_run"`
}

// runReconciliation is POST /v1/reconciliations: one run of a provider's
// statement now (`actledger reconcile`), answered when it ends with the
// run and what needs a person. Whole-tenant operators only, of the
// provider's own tenant.
func (s *Server) runReconciliation(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	if p.Scope != "" {
		s.writeError(w, r, ledger.ErrWholeTenantOnly)
		return
	}
	var req reconcileRequest
	if err := s.readJSON(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Provider == "" {
		s.writeError(w, r, request.FieldError("provider", "is required"))
		return
	}
	pc, ok := s.cfg.Registry.Provider(req.Provider)
	if !ok || pc.Tenant != p.Tenant {
		s.writeError(w, r, errorf(http.StatusNotFound, "unknown_provider", "no provider "+req.Provider+" of this tenant is configured"))
		return
	}
	if pc.Reconcile == nil {
		s.writeError(w, r, errorf(http.StatusUnprocessableEntity, "no_statement", "provider "+req.Provider+" has no reconcile section in the providers file"))
		return
	}
	var o statement.Options
	if req.Since != nil {
		o.Since = *req.Since
	}
	if req.Until != nil {
		o.Until = *req.Until
	}
	o.DryRun, o.Actor = req.DryRun, p.Actor()
	// The run may outlast the server's write timeout; its own bound is
	// the budget.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(statementRunBudget + 10*time.Second))
	rep, err := s.cfg.Statements.Run(r.Context(), req.Provider, o)
	if errors.Is(err, statement.ErrBadWindow) {
		s.writeError(w, r, request.FieldError("since", err.Error()))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	attention := make([]findingView, len(rep.Attention))
	for i, f := range rep.Attention {
		v := findingView{Finding: f.Finding, Reference: f.Reference, ProviderReference: f.ProviderReference,
			Created: rfc3339Ptr(f.Created), Skipped: f.Skip}
		if f.OperationID != nil {
			id := f.OperationID.String()
			v.OperationID = &id
		}
		attention[i] = v
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"reconciliation": viewReconciliation(rep.Run), "dry_run": req.DryRun,
		"attention": attention, "attention_not_listed": rep.Unlisted,
	})
}
