package api

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/view"
)

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

// viewEvent is e as principal p may see it: an agent never sees a
// supplier's raw answer (an attempt's or a lookup's body, a webhook's
// data), which may name a customer.
func viewEvent(e ledger.Event, p auth.Principal) view.Event {
	return view.OfEvent(e, view.Answers(p.Role != auth.RoleAgent))
}

// rfc3339 formats times as the contract wants them: RFC 3339 in UTC.
func rfc3339(t time.Time) string { return view.Time(t) }

func rfc3339Ptr(t *time.Time) *string { return view.TimePtr(t) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
