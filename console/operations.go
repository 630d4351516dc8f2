package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/ledger"
)

// operationsList names the Operations page's cursors: its positions are
// GET /v1/operations' (ledger.OperationsCursor).
const operationsList = "operations"

// maxFilterText bounds a key, action, provider or client key typed into
// the filter: longer than any the ledger holds is a mistake.
const maxFilterText = 512

// filterTime is the format of the filter's time fields, as a browser's
// datetime-local input sends them; the console reads them as UTC.
const filterTime = "2006-01-02T15:04"

// operationsForm is the filter as typed, shown back in the form.
type operationsForm struct {
	Key, ClientKey, Status, Action, Provider, Since, Until string
}

// operationsData is the Operations page.
type operationsData struct {
	Form     operationsForm
	Statuses []ledger.Status
	// Actions and Providers are the configured ones, offered in the form
	// (any other may be typed: the history may hold removed ones).
	Actions, Providers []string
	Operations         []ledger.Operation
	// ScannedTo is set when a filter on what no index holds read its
	// window of the history without filling the page.
	ScannedTo *time.Time
	Filtered  bool
}

// readOperationsFilter reads the Operations page's address into a ledger
// filter, or says what is wrong with it in words for the page.
func readOperationsFilter(q url.Values) (operationsForm, ledger.OperationsFilter, string) {
	form := operationsForm{
		Key: strings.TrimSpace(q.Get("key")), ClientKey: strings.TrimSpace(q.Get("client_key")),
		Status: q.Get("status"), Action: strings.TrimSpace(q.Get("action")), Provider: strings.TrimSpace(q.Get("provider")),
		Since: strings.TrimSpace(q.Get("since")), Until: strings.TrimSpace(q.Get("until")),
	}
	f := ledger.OperationsFilter{Status: ledger.Status(form.Status), Key: form.Key, ClientKey: form.ClientKey,
		Action: form.Action, Provider: form.Provider}
	if f.Status != "" && !f.Status.Valid() {
		return form, f, "State: not a state of the contract."
	}
	for name, v := range map[string]string{"Key": form.Key, "Client key": form.ClientKey, "Action": form.Action, "Provider": form.Provider} {
		if len(v) > maxFilterText || !utf8.ValidString(v) {
			return form, f, name + ": at most " + itoa(maxFilterText) + " bytes of text."
		}
	}
	var err error
	if f.Since, err = parseFilterTime(form.Since); err != nil {
		return form, f, "From: " + err.Error()
	}
	if f.Until, err = parseFilterTime(form.Until); err != nil {
		return form, f, "Until: " + err.Error()
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return form, f, "From must be before Until."
	}
	return form, f, ""
}

// parseFilterTime reads a time field: empty is no bound; a browser's
// datetime-local value (UTC) or RFC 3339.
func parseFilterTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{filterTime, filterTime + ":05", filterTime + ":05.000", time.RFC3339Nano} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, errors.New("not a time (write it as 2026-12-01T09:53, in UTC)")
}

// operations lists the operations the token may see, newest first, a
// page at a time, filtered by key, client key, state, action, provider
// and time range: the list of GET /v1/operations (ledger.OperationsPage)
// with the same positions. Bad input says so on the page, with the form.
func (c *Console) operations(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	q := r.URL.Query()
	form, filter, bad := readOperationsFilter(q)
	d := operationsData{Form: form, Statuses: ledger.Statuses, Filtered: form != operationsForm{}}
	d.Actions, d.Providers = c.cfg.API.Scopes()
	v := view{P: &p, Title: "Operations", Nav: "operations", Data: &d}
	if bad != "" {
		v.Error = bad + " Nothing was listed."
		c.render(w, r, http.StatusBadRequest, "operations", v)
		return
	}
	var after ledger.OperationsCursor
	afterPtr := &after
	if !decodeCursor(r, operationsList, &after) {
		afterPtr = nil
	}
	limit := pageSize(r)
	page, err := c.cfg.Ledger.OperationsPage(r.Context(), p.Access(), filter, afterPtr, limit)
	if err != nil {
		c.fail(w, r, &p, err)
		return
	}
	d.Operations, d.ScannedTo = page.Operations, page.ScannedTo
	if page.Next != nil {
		next := url.Values{"cursor": {encodeCursor(operationsList, *page.Next)}, "limit": {itoa(limit)}}
		for k, val := range map[string]string{"key": form.Key, "client_key": form.ClientKey, "status": form.Status,
			"action": form.Action, "provider": form.Provider, "since": form.Since, "until": form.Until} {
			if val != "" {
				next.Set(k, val)
			}
		}
		v.Next = "/console/operations?" + next.Encode()
	}
	c.render(w, r, http.StatusOK, "operations", v)
}
