package request

import (
	"encoding/json"

	"github.com/google/uuid"
)

// Operation is the body of POST /v1/operations: an agent's intention,
// under an approval or as a proposal.
type Operation struct {
	Action     string          `json:"action"`
	Key        *string         `json:"key"`
	Params     json.RawMessage `json:"params"`
	ApprovalID string          `json:"approval_id"`
	// RequestApproval makes the request a proposal: no approval yet, a
	// person or the action's policy decides.
	RequestApproval bool `json:"request_approval"`
	// Reason is the proposal's one sentence for the approver.
	Reason *string `json:"reason"`
}

// Validate checks the fields other than action (the api checks that
// first, since an unconfigured action is answered before anything else)
// and returns the approval id; uuid.Nil when none was given. A proposal
// needs a key, unless the action derives it (businessKey).
func (req Operation) Validate(businessKey bool) (uuid.UUID, error) {
	if req.RequestApproval {
		switch {
		case req.ApprovalID != "":
			return uuid.Nil, FieldError("approval_id", "give approval_id or request_approval, not both")
		case req.Key == nil && !businessKey:
			return uuid.Nil, FieldError("key", "is required with request_approval: it is the proposal's identity")
		}
		if req.Reason != nil {
			if err := CheckText("reason", *req.Reason, MaxNameLength); err != nil {
				return uuid.Nil, err
			}
		}
	} else if req.Reason != nil {
		return uuid.Nil, FieldError("reason", "is only for a proposal (request_approval: true)")
	}
	if req.Key != nil {
		if err := CheckKey("key", *req.Key); err != nil {
			return uuid.Nil, err
		}
	}
	if err := CheckParams("params", req.Params); err != nil {
		return uuid.Nil, err
	}
	// A missing or unknown approval is the approval check's to refuse
	// (403 approval_mismatch), after a replay of an existing key had its
	// chance: uuid.Nil names no approval.
	id, err := uuid.Parse(req.ApprovalID)
	if err != nil {
		return uuid.Nil, nil
	}
	return id, nil
}
