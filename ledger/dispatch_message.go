package ledger

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Dispatch is the payload of a dispatch message: a pointer to an operation
// that is ready to be sent. The dispatcher reads everything else from the
// ledger.
type Dispatch struct {
	OperationID uuid.UUID `json:"operation_id"`
	Version     int64     `json:"version"`
}

// dispatchMsgIDPrefix starts every dispatch message's Nats-Msg-Id. The SQL
// that looks for an operation's waiting message (waitsForMessage) matches
// on it, so both are built from this one constant.
const dispatchMsgIDPrefix = "dispatch."

// DispatchMsgID is the Nats-Msg-Id of the dispatch message for an operation
// at version: republishing the same row is deduplicated, while a later
// deliberate re-publish (at a newer version) is not.
func DispatchMsgID(id uuid.UUID, version int64) string {
	return fmt.Sprintf("%s%s.%d", dispatchMsgIDPrefix, id, version)
}

// DispatchMessage describes the outbox message that hands operation
// OperationID at Version to a dispatcher. Every writer of dispatch messages
// (enqueue, a scheduled retry, an operator's retry, a resume, the stuck
// sweeper) builds its row with Outbox, so the payload and the Nats-Msg-Id
// have one definition.
type DispatchMessage struct {
	// Subject is the provider's dispatch subject.
	Subject     string
	OperationID uuid.UUID
	Version     int64
	// DeliverAfter, when set, holds the message in the outbox until then
	// (a retry's backoff); zero sends it now.
	DeliverAfter time.Time
	// RepublishedAt, when set, marks a deliberate re-publish of the same
	// version (a resume, a sweep of a lost message) made at that time: its
	// Nats-Msg-Id is then new, so JetStream's duplicate window does not
	// swallow it.
	RepublishedAt time.Time
	// Traceparent is the operation's trace context (Operation.Traceparent).
	Traceparent string
}

// Outbox returns the outbox row for m.
func (m DispatchMessage) Outbox() OutboxMessage {
	// Marshalling a UUID and an integer cannot fail.
	payload, _ := json.Marshal(Dispatch{OperationID: m.OperationID, Version: m.Version})
	msgID := DispatchMsgID(m.OperationID, m.Version)
	if !m.RepublishedAt.IsZero() {
		msgID = fmt.Sprintf("%s.r%d", msgID, m.RepublishedAt.UnixNano())
	}
	return OutboxMessage{Subject: m.Subject, MsgID: msgID, Payload: payload, DeliverAfter: m.DeliverAfter, Traceparent: m.Traceparent}
}
