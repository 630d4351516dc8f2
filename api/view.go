package api

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/tracing"
)

// operationView is the contract's JSON shape of an operation.
type operationView struct {
	ID                uuid.UUID       `json:"id"`
	Tenant            string          `json:"tenant"`
	Action            string          `json:"action"`
	Key               string          `json:"key"`
	ClientKey         *string         `json:"client_key"` // the caller's key beside a business key
	Status            ledger.Status   `json:"status"`
	Params            json.RawMessage `json:"params"`
	ParamsFingerprint string          `json:"params_fingerprint"`
	ApprovalID        *uuid.UUID      `json:"approval_id"` // null while a proposal waits
	ExternalKey       string          `json:"external_key"`
	Provider          string          `json:"provider"`
	ProviderReference *string         `json:"provider_reference"`
	Attempts          int             `json:"attempts"`
	CreatedAt         string          `json:"created_at"`
	UpdatedAt         string          `json:"updated_at"`
	Review            *reviewView     `json:"review,omitempty"`
	Flags             []string        `json:"flags,omitempty"`
	Summary           string          `json:"summary"`
	// Scope is the access scope of the token that requested the
	// operation; null: a token of the whole tenant's.
	Scope *string `json:"scope"`
	// TraceID is the trace of the request that created the operation,
	// which every later step of it joins; null without tracing.
	TraceID *string `json:"trace_id"`
}

type reviewView struct {
	Reason   ledger.ReviewReason `json:"reason"`
	Owner    string              `json:"owner"`
	Deadline *string             `json:"deadline"`
}

func viewOperation(op ledger.Operation) operationView {
	v := operationView{
		ID: op.ID, Tenant: op.Tenant, Action: op.Action, Key: op.Key, ClientKey: op.ClientKey, Status: op.Status,
		Params: op.Params, ParamsFingerprint: op.ParamsFingerprint,
		ExternalKey: op.ExternalKey, Provider: op.Provider, ProviderReference: op.ProviderReference,
		Attempts: op.Attempts, CreatedAt: rfc3339(op.CreatedAt), UpdatedAt: rfc3339(op.UpdatedAt),
		Flags: op.Flags, Summary: op.Summary(), Scope: op.Scope,
	}
	if op.ApprovalID != uuid.Nil {
		v.ApprovalID = &op.ApprovalID
	}
	if id := tracing.TraceID(deref(op.Traceparent)); id != "" {
		v.TraceID = &id
	}
	if op.Status == ledger.StatusReview && op.ReviewReason != nil {
		v.Review = &reviewView{Reason: *op.ReviewReason, Owner: deref(op.ReviewOwner), Deadline: rfc3339Ptr(op.ReviewDeadline)}
	}
	return v
}

type approvalView struct {
	ID                uuid.UUID       `json:"id"`
	Action            string          `json:"action"`
	Params            json.RawMessage `json:"params"`
	ParamsFingerprint string          `json:"params_fingerprint"`
	PolicyVersion     string          `json:"policy_version"`
	ExpiresAt         string          `json:"expires_at"`
	MaxUses           int             `json:"max_uses"`
	Uses              int             `json:"uses"`
	RevokedAt         *string         `json:"revoked_at"`
	CreatedAt         string          `json:"created_at"`
	// Account and Environment are the provider's the approval was granted
	// for; null on an approval older than the binding.
	Account     *string `json:"account"`
	Environment *string `json:"environment"`
	// Scope is the approver's access scope, the only scope whose
	// operations the approval authorises; null: any scope of the tenant.
	Scope *string `json:"scope"`
}

func viewApproval(a ledger.Approval) approvalView {
	return approvalView{
		ID: a.ID, Action: a.Action, Params: a.Params, ParamsFingerprint: a.ParamsFingerprint,
		PolicyVersion: a.PolicyVersion, ExpiresAt: rfc3339(a.ExpiresAt), MaxUses: a.MaxUses,
		Uses: a.Uses, RevokedAt: rfc3339Ptr(a.RevokedAt), CreatedAt: rfc3339(a.CreatedAt),
		Account: a.Account, Environment: a.Environment, Scope: a.Scope,
	}
}

type eventView struct {
	Seq    int64            `json:"seq"`
	At     string           `json:"at"`
	Kind   ledger.EventKind `json:"kind"`
	From   *ledger.Status   `json:"from"`
	To     ledger.Status    `json:"to"`
	Actor  string           `json:"actor"`
	Detail json.RawMessage  `json:"detail"`
}

// viewEvent is e as principal p may see it: an agent never sees a
// supplier's raw answer (an attempt's or a lookup's body, a webhook's
// data), which may name a customer; operators and approvers see the
// evidence the provider's evidence.keep kept.
func viewEvent(e ledger.Event, p auth.Principal) eventView {
	detail := e.Detail
	if p.Role == auth.RoleAgent {
		detail = withoutAnswers(detail)
	}
	return eventView{Seq: e.Seq, At: rfc3339(e.At), Kind: e.Kind, From: e.From, To: e.To, Actor: e.Actor, Detail: detail}
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

// rfc3339 formats times as the contract wants them: RFC 3339 in UTC.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func rfc3339Ptr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := rfc3339(*t)
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
