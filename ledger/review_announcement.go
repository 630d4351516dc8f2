package ledger

import (
	"time"

	"github.com/google/uuid"
)

// ReviewAnnouncement is the body of a review-stream message: every new
// review item is announced, in the transaction that opens it, so that
// operators can replay the stream (reconciler.Replay). It is a pointer to
// the item, like every message: a replay reads the operation or the
// evidence row again before it acts.
//
// An operation's announcement is written by transition_operations (SQL);
// unmatched evidence's by RecordUnmatched (Go, with this type). A test
// holds both to this type and to ReviewSubject.
type ReviewAnnouncement struct {
	// OperationID names the operation in review; nil for evidence.
	OperationID *uuid.UUID `json:"operation_id,omitempty"`
	// EvidenceID names the unmatched evidence; nil for an operation.
	EvidenceID *int64 `json:"evidence_id,omitempty"`
	// Tenant is the tenant's name, for people reading the stream.
	Tenant string       `json:"tenant"`
	Action string       `json:"action,omitempty"`
	Key    string       `json:"key,omitempty"`
	Reason ReviewReason `json:"reason"`
	// Reference and ProviderReference are what unmatched evidence named.
	Reference         string     `json:"reference,omitempty"`
	ProviderReference *string    `json:"provider_reference,omitempty"`
	Provider          string     `json:"provider"`
	Owner             string     `json:"owner"`
	Deadline          *time.Time `json:"deadline"`
	// Version and At are the operation's when it entered review.
	Version int64      `json:"version,omitempty"`
	At      *time.Time `json:"at,omitempty"`
}

// unownedSubjectToken is the subject token of review items no tenant owns
// (evidence from a provider without a tenant): no tenant id is "_", so no
// tenant's replay reads them.
const unownedSubjectToken = "_"

// ReviewSubject is the subject of the review announcements of the tenant
// whose id is tenant (nil: evidence no tenant owns) for reason ("*" for
// every reason), under prefix (Subjects.ReviewSubjectPrefix). The token is
// the tenant's id in its canonical text form (as Postgres writes
// uuid::text, which transition_operations uses), never its name: names are
// free text, and no mapping of them to subject tokens is both readable and
// free of collisions ("acme.eu" and "acme_eu" would share one).
func ReviewSubject(prefix string, tenant *uuid.UUID, reason string) string {
	token := unownedSubjectToken
	if tenant != nil {
		token = tenant.String()
	}
	return prefix + "." + token + "." + reason
}
