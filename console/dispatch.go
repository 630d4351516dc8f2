package console

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/ledger"
)

// inFlightList names the in-flight list's cursors.
const inFlightList = "in_flight"

type inFlightRow struct {
	ledger.Operation
	Age time.Duration
}

type pauseRow struct {
	ledger.Pause
	Age time.Duration
}

type dispatchData struct {
	Circuits []ledger.Circuit
	// Statements are each provider's last statement run (none for a
	// scoped operator: a run covers every scope).
	Statements         []statementRow
	Pauses             []pauseRow
	InFlight           []inFlightRow
	Actions, Providers []string
}

// statementRow is a provider's last statement run, its counts in the
// contract's order.
type statementRow struct {
	ledger.StatementRun
	Counts []findingCount
}

type findingCount struct {
	Finding ledger.Finding
	N       int64
	// Reason is the review reason of the items the finding opens (they
	// wait in the review queue, which the count links to filtered by
	// it); empty for a finding that opens none.
	Reason ledger.ReviewReason
}

// findingReasons are the review items each finding opens: an operation
// in review with that reason, or (unexplained) unmatched evidence.
var findingReasons = map[ledger.Finding]ledger.ReviewReason{
	ledger.FindingMismatch:    ledger.ReasonEffectMismatch,
	ledger.FindingDuplicate:   ledger.ReasonDuplicateEffect,
	ledger.FindingMissing:     ledger.ReasonEffectMissing,
	ledger.FindingUnexplained: ledger.ReasonUnmatchedEvidence,
}

func newStatementRow(run ledger.StatementRun) statementRow {
	row := statementRow{StatementRun: run}
	for _, f := range ledger.Findings {
		row.Counts = append(row.Counts, findingCount{Finding: f, N: run.Findings[f], Reason: findingReasons[f]})
	}
	return row
}

// dispatch shows the tenant's pauses (who, when) and its calls in flight
// with their age, and the pause and resume buttons.
func (c *Console) dispatch(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	c.showDispatch(w, r, p, http.StatusOK, dispatchNotice(r), "")
}

// dispatchNotice is the notice after a pause or resume, from fixed words
// and a parsed number.
func dispatchNotice(r *http.Request) string {
	q := r.URL.Query()
	switch q.Get("done") {
	case "paused":
		return "Paused. Matching work stays queued; calls already in flight finish (listed below)."
	case "resumed":
		n, err := strconv.Atoi(q.Get("removed"))
		if err != nil {
			return ""
		}
		return "Resumed: " + itoa(n) + " pause(s) removed; the work they held goes back to the dispatcher."
	}
	return ""
}

func (c *Console) showDispatch(w http.ResponseWriter, r *http.Request, p auth.Principal, status int, notice, problem string) {
	var after ledger.Position
	afterPtr := &after
	if !decodeCursor(r, inFlightList, &after) {
		afterPtr = nil
	}
	limit := pageSize(r)
	pauses, ops, next, err := c.cfg.API.DispatchState(r.Context(), p, afterPtr, limit)
	if err != nil {
		c.fail(w, r, &p, err)
		return
	}
	circuits, err := c.cfg.API.Circuits(r.Context())
	if err != nil {
		c.fail(w, r, &p, err)
		return
	}
	now := c.cfg.Ledger.Now()
	in := p.Access()
	runs, err := c.cfg.Ledger.LastStatementRuns(r.Context(), &in)
	if err != nil {
		c.fail(w, r, &p, err)
		return
	}
	d := dispatchData{Circuits: circuits}
	for _, run := range runs {
		d.Statements = append(d.Statements, newStatementRow(run))
	}
	d.Actions, d.Providers = c.cfg.API.Scopes()
	for _, pz := range pauses {
		d.Pauses = append(d.Pauses, pauseRow{Pause: pz, Age: now.Sub(pz.PausedAt)})
	}
	for _, op := range ops {
		d.InFlight = append(d.InFlight, inFlightRow{Operation: op, Age: now.Sub(op.UpdatedAt)})
	}
	v := view{P: &p, Title: "Dispatch", Nav: "dispatch", Notice: notice, Error: problem, Data: d}
	if next != nil {
		v.Next = "/console/dispatch?" + url.Values{"cursor": {encodeCursor(inFlightList, *next)}, "limit": {itoa(limit)}}.Encode()
	}
	c.render(w, r, status, "dispatch", v)
}

// scopeForm reads a pause or resume form: empty provider or action means
// any.
func (c *Console) scopeForm(w http.ResponseWriter, r *http.Request, p auth.Principal) (api.DispatchScope, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.render(w, r, http.StatusRequestEntityTooLarge, "error", view{P: &p, Title: "Refused", Error: "The form could not be read; nothing changed."})
		return api.DispatchScope{}, false
	}
	return api.DispatchScope{Provider: r.PostFormValue("provider"), Action: r.PostFormValue("action")}, true
}

// pause is the stop button, through the API's PauseDispatch.
func (c *Console) pause(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	sc, ok := c.scopeForm(w, r, p)
	if !ok {
		return
	}
	if err := c.cfg.API.PauseDispatch(r.Context(), p, sc); err != nil {
		c.dispatchRefused(w, r, p, err)
		return
	}
	http.Redirect(w, r, "/console/dispatch?done=paused", http.StatusSeeOther)
}

// resume removes the pauses within the scope, through the API's
// ResumeDispatch.
func (c *Console) resume(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	sc, ok := c.scopeForm(w, r, p)
	if !ok {
		return
	}
	removed, _, err := c.cfg.API.ResumeDispatch(r.Context(), p, sc)
	if err != nil {
		c.dispatchRefused(w, r, p, err)
		return
	}
	http.Redirect(w, r, "/console/dispatch?"+url.Values{"done": {"resumed"}, "removed": {itoa(removed)}}.Encode(), http.StatusSeeOther)
}

func (c *Console) dispatchRefused(w http.ResponseWriter, r *http.Request, p auth.Principal, err error) {
	e := api.ErrorOf(err)
	if e.Status >= 500 {
		c.fail(w, r, &p, err)
		return
	}
	c.showDispatch(w, r, p, e.Status, "", "Nothing changed: "+problem(err))
}
