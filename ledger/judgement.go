package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Judgement is what an operation's history establishes about its effect.
// It is the one reading of "an earlier attempt may have had an effect":
// the dispatcher asks it before it believes a refusal (OutcomeOpen), and
// the reconciler before it lets an operator retry or shows a review item.
type Judgement struct {
	// MayHaveHadEffect: some attempt may have reached the provider
	// without a confirmed rejection (unknown answer, success, lost lease).
	MayHaveHadEffect bool
	// EffectConfirmed: the provider confirmed the effect at some point (a
	// success, a lookup that found it, a fenced worker's late success).
	// Such an operation is never sent again, whatever a later lookup says.
	EffectConfirmed bool
	// AbsenceConfirmed: a lookup, believable by then, found nothing after
	// the last send.
	AbsenceConfirmed bool
	// LastAnswer and LastLookup are the details of the latest attempt and
	// lookup events, for people.
	LastAnswer map[string]any
	LastLookup map[string]any
}

// Open reports whether an earlier attempt may have had an effect that
// nothing has settled since: then a refusal of a later attempt says
// nothing about whether the effect exists.
func (j Judgement) Open() bool { return j.MayHaveHadEffect && !j.AbsenceConfirmed }

// The attempt classes (provider.Class) that may have had an effect. The
// ledger does not import package provider; a test holds these to it.
const (
	classUnknown   = "unknown"
	classSucceeded = "succeeded"
)

// Judge reads an operation's history, oldest event first.
func Judge(events []Event) Judgement {
	var j Judgement
	for _, e := range events {
		detail := DecodeDetail(e.Detail)
		switch e.Kind {
		case EventAttempt:
			j.LastAnswer = detail
			if c, _ := detail["class"].(string); c == classUnknown || c == classSucceeded {
				j.MayHaveHadEffect, j.AbsenceConfirmed = true, false
				j.EffectConfirmed = j.EffectConfirmed || c == classSucceeded
			}
		case EventEvidence, EventReconciled:
			if detail["status"] == string(EvidenceSucceeded) {
				j.MayHaveHadEffect, j.EffectConfirmed, j.AbsenceConfirmed = true, true, false
			}
		case EventStaleResult:
			j.MayHaveHadEffect, j.AbsenceConfirmed = true, false
			j.EffectConfirmed = j.EffectConfirmed || detail["would_be"] == string(StatusSucceeded)
		case EventLeaseExpired, EventLedgerRecovery:
			j.MayHaveHadEffect, j.AbsenceConfirmed = true, false
		case EventLookupFound, EventLookupDuplicate:
			j.LastLookup = detail
			j.MayHaveHadEffect, j.EffectConfirmed, j.AbsenceConfirmed = true, true, false
		case EventLookupAbsentConfirmed, EventReplayLookupAbsent:
			j.LastLookup = detail
			j.AbsenceConfirmed = true
		case EventLookupAbsentTooEarly, EventLookupFailed, EventLookupInconclusive:
			j.LastLookup = detail
		}
	}
	return j
}

// DecodeDetail reads an event's detail for judging and showing: numbers
// stay json.Number, so a provider's large integer reaches the operator
// digit for digit (a float64 would round it past 2^53). A detail that is
// not an object reads as nil.
func DecodeDetail(raw []byte) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var detail map[string]any
	if dec.Decode(&detail) != nil {
		return nil
	}
	return detail
}

// OutcomeOpen reports whether an earlier attempt of operation id may have
// had an effect that no lookup has since excluded (Judgement.Open): then a
// refusal of a later attempt says nothing about whether the effect exists.
func (s *Store) OutcomeOpen(ctx context.Context, id uuid.UUID) (bool, error) {
	rows, _ := s.pool.Query(ctx, operationEventsInternal, id)
	events, err := pgx.CollectRows(rows, pgx.RowToStructByName[Event])
	if err != nil {
		return false, fmt.Errorf("read outcome history of %s: %w", id, err)
	}
	return Judge(events).Open(), nil
}

// operationEventsInternal is the history of operation $1 whatever its
// tenant, for workers acting on ids from the ledger's own messages.
const operationEventsInternal = `SELECT seq, at, kind, from_status, to_status, actor, detail
FROM operation_events WHERE operation_id = $1
ORDER BY seq`
