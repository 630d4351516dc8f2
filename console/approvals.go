package console

import (
	"net/http"
	"net/url"

	"github.com/google/uuid"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/ledger"
)

// approvalsList names the approval requests' cursors.
const approvalsList = "approvals"

// approvalsData is the approval requests page.
type approvalsData struct {
	Items []api.ApprovalRequest
}

// approvals lists the tenant's open proposals, oldest first, params in
// full with their fingerprint.
func (c *Console) approvals(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	c.showApprovals(w, r, p, http.StatusOK, decided(r), "")
}

// decided is the notice after a decision, from the redirect's address:
// fixed words and a parsed id, never text from the address.
func decided(r *http.Request) string {
	q := r.URL.Query()
	id, err := uuid.Parse(q.Get("id"))
	if err != nil {
		return ""
	}
	switch q.Get("done") {
	case "approved":
		return "Approved " + id.String() + ": it is queued and will be sent once."
	case "denied":
		return "Denied " + id.String() + ": nothing was sent, and the agent is told your reason."
	}
	return ""
}

func (c *Console) showApprovals(w http.ResponseWriter, r *http.Request, p auth.Principal, status int, notice, problem string) {
	var after ledger.AwaitingCursor
	afterPtr := &after
	if !decodeCursor(r, approvalsList, &after) {
		afterPtr = nil
	}
	limit := pageSize(r)
	items, next, err := c.cfg.API.ApprovalRequests(r.Context(), p, afterPtr, limit)
	if err != nil {
		c.fail(w, r, &p, err)
		return
	}
	v := view{P: &p, Title: "Approval requests", Nav: "approvals", Notice: notice, Error: problem, Data: approvalsData{Items: items}}
	if next != nil {
		v.Next = "/console/approvals?" + url.Values{"cursor": {encodeCursor(approvalsList, *next)}, "limit": {itoa(limit)}}.Encode()
	}
	c.render(w, r, status, "approvals", v)
}

// approve approves a proposal with the fingerprint the page showed; a
// proposal that changed or was decided elsewhere is refused with the
// API's words, and the list is shown again.
func (c *Console) approve(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	id, ok := c.formFor(w, r, &p)
	if !ok {
		return
	}
	in := api.Approve{ParamsFingerprint: r.PostFormValue("params_fingerprint")}
	if note := r.PostFormValue("note"); note != "" {
		in.Note = &note
	}
	if _, err := c.cfg.API.ApproveProposal(r.Context(), p, id, in); err != nil {
		c.refused(w, r, p, id, err)
		return
	}
	http.Redirect(w, r, "/console/approvals?"+url.Values{"done": {"approved"}, "id": {id.String()}}.Encode(), http.StatusSeeOther)
}

// deny declines a proposal with the approver's reason.
func (c *Console) deny(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	id, ok := c.formFor(w, r, &p)
	if !ok {
		return
	}
	if _, err := c.cfg.API.DenyProposal(r.Context(), p, id, r.PostFormValue("reason")); err != nil {
		c.refused(w, r, p, id, err)
		return
	}
	http.Redirect(w, r, "/console/approvals?"+url.Values{"done": {"denied"}, "id": {id.String()}}.Encode(), http.StatusSeeOther)
}

// refused shows the list again with why the decision on id did not
// happen, under the API's status for it.
func (c *Console) refused(w http.ResponseWriter, r *http.Request, p auth.Principal, id uuid.UUID, err error) {
	e := api.ErrorOf(err)
	if e.Status >= 500 {
		c.fail(w, r, &p, err)
		return
	}
	c.showApprovals(w, r, p, e.Status, "", "Nothing changed for "+id.String()+": "+problem(err))
}

// formFor reads a bounded form and the {id} of the address; an id that is
// not one answers the not-found page.
func (c *Console) formFor(w http.ResponseWriter, r *http.Request, p *auth.Principal) (uuid.UUID, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.render(w, r, http.StatusRequestEntityTooLarge, "error", view{P: p, Title: "Refused", Error: "The form could not be read (is it over 64 KiB?); nothing changed."})
		return uuid.Nil, false
	}
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.render(w, r, http.StatusNotFound, "error", view{P: p, Title: "Not found", Error: notFoundText})
		return uuid.Nil, false
	}
	return id, true
}
