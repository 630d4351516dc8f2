package console

import (
	"fmt"
	"net/http"
	"time"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/display"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/reconciler"
)

// stateCount is one state's number on the overview.
type stateCount struct {
	Status ledger.Status
	N      int64
}

// overviewData is the console's landing page: what waits and what is
// wrong, for the signed-in token's tenant or scope, each figure read
// without counting the ledger.
type overviewData struct {
	// States are the operations by state (ledger.OperationCounts: the
	// counts the ledger keeps, not a count of its rows), in the order of
	// ledger.Statuses, and Total their sum.
	States []stateCount
	Total  int64
	// OldestProposal is the proposal that has waited longest for a
	// decision; nil when none waits.
	OldestProposal *api.ApprovalRequest
	// OldestReview is the review item that has waited longest, with its
	// owner; nil when the queue is empty or the review pages are off.
	OldestReview *reconciler.ReviewItem
	// OpenCircuits are the providers whose circuit is open.
	OpenCircuits []ledger.Circuit
	// NotificationsFailing names the notification receivers of the
	// tenant that gave up an event in the last failingWindow, one line
	// each; the page shows the section only when it is not empty.
	NotificationsFailing []string
	Now                  time.Time
}

// failingWindow is how recent a receiver's last given-up event must be for
// the overview to list it as failing: a day, the retry window of one
// event, so a receiver that failed once long ago drops off the page.
const failingWindow = 24 * time.Hour

// overview is the console's landing page for both roles: operations by
// state, the oldest proposal waiting, the oldest review item and its
// owner, open circuits; each links to the page that acts on it.
func (c *Console) overview(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	ctx := r.Context()
	d := overviewData{Now: c.cfg.Ledger.Now()}
	counts, err := c.cfg.Ledger.OperationCounts(ctx, p.Access())
	if err != nil {
		c.fail(w, r, &p, err)
		return
	}
	for _, s := range ledger.Statuses {
		d.States = append(d.States, stateCount{Status: s, N: counts[s]})
		d.Total += counts[s]
	}
	proposals, _, err := c.cfg.API.ApprovalRequests(ctx, p, nil, 1)
	if err != nil {
		c.fail(w, r, &p, err)
		return
	}
	if len(proposals) > 0 {
		d.OldestProposal = &proposals[0]
	}
	if c.cfg.Reconciler != nil {
		items, _, err := c.cfg.Reconciler.ReviewPage(ctx, p.Access(), nil, 1)
		if err != nil {
			c.fail(w, r, &p, err)
			return
		}
		if len(items) > 0 {
			d.OldestReview = &items[0]
		}
	}
	circuits, err := c.cfg.API.Circuits(ctx)
	if err != nil {
		c.fail(w, r, &p, err)
		return
	}
	for _, ci := range circuits {
		if ci.Open() {
			d.OpenCircuits = append(d.OpenCircuits, ci)
		}
	}
	failures, err := c.cfg.Ledger.NotificationFailures(ctx, p.Access())
	if err != nil {
		c.fail(w, r, &p, err)
		return
	}
	for _, f := range failures {
		if f.LastFailedAt != nil && d.Now.Sub(*f.LastFailedAt) < failingWindow {
			events := "events"
			if f.Failed == 1 {
				events = "event"
			}
			d.NotificationsFailing = append(d.NotificationsFailing, fmt.Sprintf("%s: %d %s given up, the last at %s",
				f.Receiver, f.Failed, events, display.Time(*f.LastFailedAt)))
		}
	}
	c.render(w, r, http.StatusOK, "overview", view{P: &p, Title: "Overview", Nav: "overview", Data: d})
}
