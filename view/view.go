package view

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/tracing"
)

// Operation is the contract's JSON shape of an operation.
type Operation struct {
	ID                uuid.UUID       `json:"id"`
	Tenant            string          `json:"tenant"`
	Action            string          `json:"action"`
	Key               string          `json:"key"`
	ClientKey         *string         `json:"client_key"` // the caller's key beside a business key
	Status            ledger.Status   `json:"status"`
	Params            json.RawMessage `json:"params"`
	ParamsFingerprint string          `json:"params_fingerprint"`
	ApprovalID        *uuid.UUID      `json:"approval_id"` // null while a proposal waits
	// ApprovedBy names who granted the approval: "person:<email or
	// subject>", "approver:<token name>" or "policy:<version>"; null
	// while a proposal waits.
	ApprovedBy        *string  `json:"approved_by"`
	ExternalKey       string   `json:"external_key"`
	Provider          string   `json:"provider"`
	ProviderReference *string  `json:"provider_reference"`
	Attempts          int      `json:"attempts"`
	CreatedAt         string   `json:"created_at"`
	UpdatedAt         string   `json:"updated_at"`
	Review            *Review  `json:"review,omitempty"`
	Flags             []string `json:"flags,omitempty"`
	Summary           string   `json:"summary"`
	// Scope is the access scope of the token that requested the
	// operation; null: a token of the whole tenant's.
	Scope *string `json:"scope"`
	// TraceID is the trace of the request that created the operation,
	// which every later step of it joins; null without tracing.
	TraceID *string `json:"trace_id"`
}

// Review is an operation's open review item: why, who, by when.
type Review struct {
	Reason   ledger.ReviewReason `json:"reason"`
	Owner    string              `json:"owner"`
	Deadline *string             `json:"deadline"`
}

// OfOperation is op in the contract's shape.
func OfOperation(op ledger.Operation) Operation {
	v := Operation{
		ID: op.ID, Tenant: op.Tenant, Action: op.Action, Key: op.Key, ClientKey: op.ClientKey, Status: op.Status,
		Params: op.Params, ParamsFingerprint: op.ParamsFingerprint, ApprovedBy: op.ApprovedBy,
		ExternalKey: op.ExternalKey, Provider: op.Provider, ProviderReference: op.ProviderReference,
		Attempts: op.Attempts, CreatedAt: Time(op.CreatedAt), UpdatedAt: Time(op.UpdatedAt),
		Flags: op.Flags, Summary: op.Summary(), Scope: op.Scope,
	}
	if op.ApprovalID != uuid.Nil {
		v.ApprovalID = &op.ApprovalID
	}
	if op.Traceparent != nil {
		if id := tracing.TraceID(*op.Traceparent); id != "" {
			v.TraceID = &id
		}
	}
	if op.Status == ledger.StatusReview && op.ReviewReason != nil {
		owner := ""
		if op.ReviewOwner != nil {
			owner = *op.ReviewOwner
		}
		v.Review = &Review{Reason: *op.ReviewReason, Owner: owner, Deadline: TimePtr(op.ReviewDeadline)}
	}
	return v
}

// Event is the contract's JSON shape of one entry of a history.
type Event struct {
	Seq    int64            `json:"seq"`
	At     string           `json:"at"`
	Kind   ledger.EventKind `json:"kind"`
	From   *ledger.Status   `json:"from"`
	To     ledger.Status    `json:"to"`
	Actor  string           `json:"actor"`
	Detail json.RawMessage  `json:"detail"`
}

// Answers says whether a reader sees a supplier's raw answers in event
// details (an attempt's or a lookup's body, a webhook's data), which may
// name a customer.
type Answers bool

// The readers of a history: an agent never sees the supplier's answers;
// operators, approvers and the archive see the evidence the provider's
// evidence.keep kept.
const (
	WithoutAnswers Answers = false
	WithAnswers    Answers = true
)

// OfEvent is e in the contract's shape, as a reader that sees answers (or
// not) may see it.
func OfEvent(e ledger.Event, answers Answers) Event {
	detail := e.Detail
	if !answers {
		detail = withoutAnswers(detail)
	}
	return Event{Seq: e.Seq, At: Time(e.At), Kind: e.Kind, From: e.From, To: e.To, Actor: e.Actor, Detail: detail}
}

// History is an operation and its whole history, oldest event first: one
// line of a retention archive. Operation is what GET /v1/operations/{id}
// answered and Events what GET /v1/operations/{id}/events listed, to an
// operator.
type History struct {
	Operation Operation `json:"operation"`
	Events    []Event   `json:"events"`
}

// OfHistory is op and its events as an operator sees them.
func OfHistory(op ledger.Operation, events []ledger.Event) History {
	h := History{Operation: OfOperation(op), Events: make([]Event, len(events))}
	for i, e := range events {
		h.Events[i] = OfEvent(e, WithAnswers)
	}
	return h
}

// answerFields are the event detail fields that hold a supplier's answer
// as it came, at the top of a detail or under its "evidence".
var answerFields = []string{"body", "data"}

// withoutAnswers is detail with the supplier's answers taken out.
func withoutAnswers(detail json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(detail, &m) != nil {
		return detail
	}
	changed := false
	for _, f := range answerFields {
		if _, ok := m[f]; ok {
			delete(m, f)
			changed = true
		}
	}
	if ev, ok := m["evidence"]; ok {
		if inner := withoutAnswers(ev); string(inner) != string(ev) {
			m["evidence"], changed = inner, true
		}
	}
	if !changed {
		return detail
	}
	out, err := json.Marshal(m)
	if err != nil {
		return detail
	}
	return out
}

// Time formats times as the contract wants them: RFC 3339 in UTC.
func Time(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// TimePtr is Time of *t, or nil.
func TimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := Time(*t)
	return &s
}
