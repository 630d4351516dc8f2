package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/display"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/tracing"
)

// eventsList names the timeline's cursors.
const eventsList = "events"

// Event kinds that link an operation and its compensation.
const (
	kindCompensationFor ledger.EventKind = "compensation_for"
	kindResolved        ledger.EventKind = "resolved"
)

// evidenceKinds are the events that say what the provider's side showed.
var evidenceKinds = []ledger.EventKind{
	ledger.EventEvidence, ledger.EventStaleResult, ledger.EventLookupFound, ledger.EventLookupDuplicate, ledger.EventLookupAbsentConfirmed,
	ledger.EventReplayLookupAbsent, ledger.EventLookupAbsentTooEarly, ledger.EventLookupFailed, ledger.EventLookupInconclusive,
}

// settleable are the states in which the operation page offers the
// operator's resolve and retry (the reconciler decides).
var settleable = []ledger.Status{ledger.StatusReview, ledger.StatusFailed, ledger.StatusUnknown, ledger.StatusHeld, ledger.StatusQueued, ledger.StatusRetryWait}

// eventRow is one line of the timeline: attempts and lookups show their
// class, HTTP status, account and environment.
type eventRow struct {
	ledger.Event
	Class, HTTPStatus, Account, Environment string
	// Linked is the operation an event links to (a compensation, or the
	// operation it compensates), with Link saying which.
	Linked, Link string
}

type operationData struct {
	Op       ledger.Operation
	Summary  string
	Age      time.Duration
	Events   []eventRow
	Evidence []eventRow
	// CompensationFor and CompensatedBy are the linked operations.
	CompensationFor, CompensatedBy []string
	CanAct                         bool
	// TraceID is the operation's trace (tracing.TraceID), to look up in
	// a tracing backend; empty without tracing.
	TraceID string
}

// operation shows one operation of the tenant: summary, state, the
// timeline and evidence, its links. Another tenant's id answers exactly
// as a missing one.
func (c *Console) operation(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.fail(w, r, &p, ledger.ErrNotFound)
		return
	}
	op, err := c.cfg.Ledger.Get(r.Context(), p.Access(), id)
	if err != nil {
		c.fail(w, r, &p, err)
		return
	}
	var afterSeq int64
	decodeCursor(r, eventsList, &afterSeq)
	limit := pageSize(r)
	events, err := c.cfg.Ledger.EventsPage(r.Context(), p.Access(), id, afterSeq, limit+1)
	if err != nil {
		c.fail(w, r, &p, err)
		return
	}
	v := view{P: &p, Title: op.Action + " · " + display.Line(op.Key)}
	if len(events) > limit {
		events = events[:limit]
		v.Next = "/console/operations/" + id.String() + "?" + url.Values{"cursor": {encodeCursor(eventsList, events[limit-1].Seq)}, "limit": {itoa(limit)}}.Encode()
	}
	d := operationData{Op: op, Summary: op.Summary(), Age: c.cfg.Ledger.Now().Sub(op.CreatedAt), TraceID: traceIDOf(op),
		CanAct: p.Role == auth.RoleOperator && c.cfg.Reconciler != nil && slices.Contains(settleable, op.Status)}
	for _, e := range events {
		row := timelineRow(e)
		switch row.Link {
		case "compensation for":
			d.CompensationFor = append(d.CompensationFor, row.Linked)
		case "compensated by":
			d.CompensatedBy = append(d.CompensatedBy, row.Linked)
		}
		d.Events = append(d.Events, row)
		if slices.Contains(evidenceKinds, e.Kind) {
			d.Evidence = append(d.Evidence, row)
		}
	}
	v.Data = d
	c.render(w, r, http.StatusOK, "operation", v)
}

func timelineRow(e ledger.Event) eventRow {
	row := eventRow{Event: e}
	var detail map[string]any
	if json.Unmarshal(e.Detail, &detail) != nil {
		return row
	}
	str := func(k string) string {
		if v, ok := detail[k]; ok && v != nil {
			return fmt.Sprint(v)
		}
		return ""
	}
	row.Class, row.HTTPStatus, row.Account, row.Environment = str("class"), str("http_status"), str("account"), str("environment")
	if row.Class == "" {
		row.Class = str("lookup")
	}
	if row.HTTPStatus == "0" {
		row.HTTPStatus = ""
	}
	switch e.Kind {
	case kindCompensationFor:
		if id, err := uuid.Parse(str("operation_id")); err == nil {
			row.Linked, row.Link = id.String(), "compensation for"
		}
	case kindResolved:
		if id, err := uuid.Parse(str("compensation_operation_id")); err == nil {
			row.Linked, row.Link = id.String(), "compensated by"
		}
	}
	return row
}

// traceIDOf is op's trace id, "" when it has no trace context.
func traceIDOf(op ledger.Operation) string {
	if op.Traceparent == nil {
		return ""
	}
	return tracing.TraceID(*op.Traceparent)
}
