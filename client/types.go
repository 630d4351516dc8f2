package client

import (
	"encoding/json"
	"time"
)

// Status is an operation's state (docs/states.md).
type Status string

// The operation states of the contract.
const (
	StatusAwaitingApproval Status = "awaiting_approval"
	StatusQueued           Status = "queued"
	StatusDispatching      Status = "dispatching"
	StatusRetryWait        Status = "retry_wait"
	StatusUnknown          Status = "unknown"
	StatusSucceeded        Status = "succeeded"
	StatusFailed           Status = "failed"
	StatusHeld             Status = "held"
	StatusReview           Status = "review"
	StatusCancelled        Status = "cancelled"
)

// Final reports whether s is an end state no worker moves on its own:
// succeeded, failed, held, cancelled (a person may still reopen some).
func (s Status) Final() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusHeld, StatusCancelled:
		return true
	}
	return false
}

// InFlight reports whether the service is working on s by itself, with no
// person involved: queued, dispatching, retry_wait.
func (s Status) InFlight() bool {
	switch s {
	case StatusQueued, StatusDispatching, StatusRetryWait:
		return true
	}
	return false
}

// Operation is the API's view of an operation.
type Operation struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	Action string `json:"action"`
	Key    string `json:"key"`
	// ClientKey is the key the caller sent, when Key is the action's
	// business key (derived from the params); nil otherwise.
	ClientKey         *string         `json:"client_key"`
	Status            Status          `json:"status"`
	Params            json.RawMessage `json:"params"`
	ParamsFingerprint string          `json:"params_fingerprint"`
	ApprovalID        *string         `json:"approval_id"`
	// ApprovedBy names who approved the operation: a person
	// ("person:<email>"), a token ("approver:<name>") or "policy"; nil
	// while a proposal waits.
	ApprovedBy        *string   `json:"approved_by"`
	ExternalKey       string    `json:"external_key"`
	Provider          string    `json:"provider"`
	ProviderReference *string   `json:"provider_reference"`
	Attempts          int       `json:"attempts"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
	Review            *Review   `json:"review,omitempty"`
	Flags             []string  `json:"flags,omitempty"`
	Summary           string    `json:"summary"`
	// Scope is the access scope of the token that requested the
	// operation; nil for a token of the whole tenant.
	Scope *string `json:"scope"`
	// TraceID is the operation's OpenTelemetry trace id; nil when the
	// server does not export traces.
	TraceID *string `json:"trace_id"`
	// Compensation is the linked compensating operation a resolution
	// created (POST /v1/operations/{id}/resolve only).
	Compensation *Operation `json:"compensation,omitempty"`

	// ETag is the answer's ETag header (the operation's version), for
	// WaitOperation; empty when the server sends none.
	ETag string `json:"-"`
	// Replayed is true when a create answered an existing operation of
	// the same key and params (Idempotent-Replayed: true).
	Replayed bool `json:"-"`
}

// Review is why an operation waits for a person, who owns it and until
// when.
type Review struct {
	Reason   string     `json:"reason"`
	Owner    string     `json:"owner"`
	Deadline *time.Time `json:"deadline"`
}

// Approval is a person's approval of one action with specific params.
type Approval struct {
	ID                string          `json:"id"`
	Action            string          `json:"action"`
	Params            json.RawMessage `json:"params"`
	ParamsFingerprint string          `json:"params_fingerprint"`
	PolicyVersion     string          `json:"policy_version"`
	ExpiresAt         time.Time       `json:"expires_at"`
	MaxUses           int             `json:"max_uses"`
	Uses              int             `json:"uses"`
	RevokedAt         *time.Time      `json:"revoked_at"`
	CreatedAt         time.Time       `json:"created_at"`
}

// Revocation is the answer of a revoke: the approval and the operations
// it held before anything was sent.
type Revocation struct {
	Approval       Approval `json:"approval"`
	HeldOperations []string `json:"held_operations"`
}

// Event is one entry of an operation's history.
type Event struct {
	Seq    int64           `json:"seq"`
	At     time.Time       `json:"at"`
	Kind   string          `json:"kind"`
	From   *Status         `json:"from"`
	To     Status          `json:"to"`
	Actor  string          `json:"actor"`
	Detail json.RawMessage `json:"detail"`
}

// ApprovalRequest is an open proposal as an approver sees it: the params
// in full and their fingerprint, which an approve must name.
type ApprovalRequest struct {
	OperationID       string          `json:"operation_id"`
	Action            string          `json:"action"`
	Description       string          `json:"description,omitempty"`
	Key               string          `json:"key"`
	Params            json.RawMessage `json:"params"`
	ParamsFingerprint string          `json:"params_fingerprint"`
	Reason            string          `json:"reason"`
	RequestedBy       string          `json:"requested_by"`
	Provider          string          `json:"provider"`
	Account           string          `json:"account"`
	Environment       string          `json:"environment"`
	AgeSeconds        int64           `json:"age_seconds"`
	CreatedAt         time.Time       `json:"created_at"`
	ExpiresAt         *time.Time      `json:"expires_at"`
	Summary           string          `json:"summary"`
}

// Action is a configured action and its contract (GET /v1/actions).
type Action struct {
	Name        string `json:"name"`
	Provider    string `json:"provider"`
	Description string `json:"description"`
	// ParamsSchema is the JSON Schema 2020-12 the API checks params
	// against; null (or empty) accepts any JSON object.
	ParamsSchema json.RawMessage `json:"params_schema"`
	// BusinessKey is the action's business key expression, "" when it
	// has none: with one, the server derives each operation's key from
	// the params, and CreateOperationRequest.Key is optional (kept as the
	// operation's client key).
	BusinessKey string `json:"business_key"`
}

// DispatchStatus is the answer of GET /v1/dispatch and of pause/resume:
// the pauses in force and the calls in flight; Removed and Released are
// set by a resume.
type DispatchStatus struct {
	Paused     []Pause    `json:"paused"`
	InFlight   []InFlight `json:"in_flight"`
	Removed    int        `json:"removed"`
	Released   int        `json:"released"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// Pause is one dispatch pause; an empty provider or action matches any.
type Pause struct {
	Provider string `json:"provider"`
	Action   string `json:"action"`
	PausedBy string `json:"paused_by"`
	PausedAt string `json:"paused_at"`
	// Reason is empty for an operator's stop button, "ledger_behind"
	// for the pause actledger made when a message proved that the ledger
	// lost committed work; Detail then names the message.
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// InFlight is an operation a worker holds under a lease: its call may
// still land at the provider.
type InFlight struct {
	OperationID    string  `json:"operation_id"`
	Action         string  `json:"action"`
	Key            string  `json:"key"`
	Provider       string  `json:"provider"`
	LeaseOwner     string  `json:"lease_owner"`
	ClaimedAt      string  `json:"claimed_at"`
	AgeSeconds     float64 `json:"age_seconds"`
	LeaseExpiresAt *string `json:"lease_expires_at"`
	Attempts       int     `json:"attempts"`
}

// ReviewItem is an open item of the review list: an operation in review
// or unmatched evidence (EvidenceID set, OperationID nil).
type ReviewItem struct {
	OperationID         *string        `json:"operation_id"`
	EvidenceID          *int64         `json:"evidence_id,omitempty"`
	Action              string         `json:"action"`
	Key                 string         `json:"key"`
	Provider            string         `json:"provider"`
	Status              string         `json:"status"`
	Reason              string         `json:"reason"`
	Owner               string         `json:"owner"`
	Deadline            *time.Time     `json:"deadline"`
	AgeSeconds          float64        `json:"age_seconds"`
	Attempts            int            `json:"attempts"`
	Facts               map[string]any `json:"facts"`
	LastProviderAnswer  map[string]any `json:"last_provider_answer"`
	RetryAllowed        bool           `json:"retry_allowed"`
	LookupReliableAfter *time.Time     `json:"lookup_reliable_after"`
}

// ReplayItem is one line of a replay: an item and what reconciling it did.
type ReplayItem struct {
	OperationID *string `json:"operation_id,omitempty"`
	EvidenceID  *int64  `json:"evidence_id,omitempty"`
	Key         string  `json:"key,omitempty"`
	Reason      string  `json:"reason"`
	Result      string  `json:"result"`
	Changed     bool    `json:"changed"`
	Detail      string  `json:"detail,omitempty"`
}

// ReplaySummary is a replay's last line.
type ReplaySummary struct {
	Read      int  `json:"read"`
	Items     int  `json:"items"`
	Open      int  `json:"open"`
	Changed   int  `json:"changed"`
	Unchanged int  `json:"unchanged"`
	DryRun    bool `json:"dry_run"`
}
