package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/reconciler"
)

// reviewList names the review queue's cursors.
const reviewList = "review"

// reviewData is the review queue page.
type reviewData struct {
	Items   []reconciler.ReviewItem
	Reasons []ledger.ReviewReason
	Reason  string
	Owner   string
}

// review lists the tenant's open review items, a page at a time, with
// what is known of each; ?reason= and ?owner= narrow it.
func (c *Console) review(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	if c.cfg.Reconciler == nil {
		c.render(w, r, http.StatusNotFound, "error", view{P: &p, Title: "Not found", Error: notFoundText})
		return
	}
	q := r.URL.Query()
	reason, owner := q.Get("reason"), q.Get("owner")
	var after reconciler.ReviewCursor
	afterPtr := &after
	if !decodeCursor(r, reviewList, &after) {
		afterPtr = nil
	}
	limit := pageSize(r)
	items, next, err := c.reviewPage(r, p, afterPtr, limit, reason, owner)
	if err != nil {
		c.fail(w, r, &p, err)
		return
	}
	v := view{P: &p, Title: "Review queue", Nav: "review",
		Data: reviewData{Items: items, Reasons: ledger.ReviewReasons, Reason: reason, Owner: owner}}
	if next != nil {
		v.Next = "/console/review?" + url.Values{"cursor": {encodeCursor(reviewList, next)}, "limit": {itoa(limit)},
			"reason": {reason}, "owner": {owner}}.Encode()
	}
	c.render(w, r, http.StatusOK, "review", v)
}

// reviewPage reads the reconciler's pages. Without a filter it is one
// page; with one, whole pages of MaxPageSize are read until limit items
// match or the queue ends, so a filtered page holds at least limit items
// unless it is the last (and fewer than limit+MaxPageSize).
func (c *Console) reviewPage(r *http.Request, p auth.Principal, after *reconciler.ReviewCursor, limit int, reason, owner string) ([]reconciler.ReviewItem, *reconciler.ReviewCursor, error) {
	if reason == "" && owner == "" {
		return c.cfg.Reconciler.ReviewPage(r.Context(), p.Access(), after, limit)
	}
	var out []reconciler.ReviewItem
	for {
		items, next, err := c.cfg.Reconciler.ReviewPage(r.Context(), p.Access(), after, MaxPageSize)
		if err != nil {
			return nil, nil, err
		}
		for _, it := range items {
			if (reason == "" || string(it.Reason) == reason) && (owner == "" || it.Owner == owner) {
				out = append(out, it)
			}
		}
		if next == nil || len(out) >= limit {
			return out, next, nil
		}
		after = next
	}
}

// What an operator may do to the selected review items.
const (
	doResolveSucceeded = "resolve_succeeded"
	doResolveFailed    = "resolve_failed"
	doResolveCancelled = "resolve_cancelled"
	doRetry            = "retry"
)

// itemResult is one selected item's outcome, shown on its own line: one
// refusal never hides another's success.
type itemResult struct {
	Item string
	// OperationID links to the operation; empty for evidence.
	OperationID string
	OK          bool
	Text        string
}

// resultsData is the results page of a batch.
type resultsData struct {
	Do      string
	Results []itemResult
	Done    int
}

// act resolves or retries every selected item (form fields item =
// "op:<uuid>" or "ev:<evidence id>", do, provider_reference, note) through
// the API's functions, one after another, and shows each item's result.
// A note is required: the history says why a person settled it.
func (c *Console) act(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.render(w, r, http.StatusRequestEntityTooLarge, "error", view{P: &p, Title: "Refused", Error: "The form could not be read (is it over 64 KiB?); nothing changed."})
		return
	}
	do, note, reference := r.PostFormValue("do"), strings.TrimSpace(r.PostFormValue("note")), strings.TrimSpace(r.PostFormValue("provider_reference"))
	items := r.PostForm["item"]
	var problem string
	switch {
	case len(items) == 0:
		problem = "Select at least one item; nothing changed."
	case len(items) > MaxPageSize:
		problem = "Select at most " + itoa(MaxPageSize) + " items at once; nothing changed."
	case do != doResolveSucceeded && do != doResolveFailed && do != doResolveCancelled && do != doRetry:
		problem = "Choose what to do with the selected items; nothing changed."
	case note == "":
		problem = "A note is required: it is kept in each operation's history. Nothing changed."
	}
	if problem != "" {
		c.render(w, r, http.StatusBadRequest, "error", view{P: &p, Title: "Nothing done", Nav: "review", Error: problem})
		return
	}
	data := resultsData{Do: do, Results: make([]itemResult, len(items))}
	for i, item := range items {
		res := c.actOn(r, p, item, do, reference, note)
		if res.OK {
			data.Done++
		}
		data.Results[i] = res
	}
	c.log.InfoContext(r.Context(), "console batch done", "tenant", p.Tenant, "do", do, "items", len(items), "done", data.Done, "by", p.Actor())
	c.render(w, r, http.StatusOK, "results", view{P: &p, Title: "Results", Nav: "review", Data: data})
}

// errNotAnItem: a selection that names nothing this tenant could have.
var errNotAnItem = errors.New("console: not a review item")

func (c *Console) actOn(r *http.Request, p auth.Principal, item, do, reference, note string) itemResult {
	res := itemResult{Item: item}
	kind, id, _ := strings.Cut(item, ":")
	var err error
	switch kind {
	case "op":
		opID, perr := uuid.Parse(id)
		if perr != nil {
			err = ledger.ErrNotFound
			break
		}
		res.OperationID = opID.String()
		var op ledger.Operation
		if do == doRetry {
			op, err = c.cfg.API.RetryOperation(r.Context(), p, opID, note)
		} else {
			op, _, err = c.cfg.API.ResolveOperation(r.Context(), p, opID, reconciler.Resolution{
				Outcome: strings.TrimPrefix(do, "resolve_"), ProviderReference: reference, Note: note,
			})
		}
		if err == nil {
			res.Text = "now " + string(op.Status)
		}
	case "ev":
		evID, perr := strconv.ParseInt(id, 10, 64)
		switch {
		case perr != nil:
			err = ledger.ErrNotFound
		case do == doRetry:
			err = errNotAnItem
			res.Text = "unmatched evidence is not an operation; it can only be resolved with a note"
		default:
			err = c.cfg.API.ResolveEvidence(r.Context(), p, evID, note)
			if err == nil {
				res.Text = "evidence closed"
			}
		}
	default:
		err = ledger.ErrNotFound
	}
	if err != nil {
		if res.Text == "" {
			res.Text = problem(err)
		}
		return res
	}
	res.OK = true
	return res
}
