package ledger

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// Lapse says why an operation may no longer be sent although it was
// approved: empty when it may be sent.
type Lapse string

// The reasons an approved operation may lapse before it is sent.
const (
	LapseNone            Lapse = ""
	LapseApprovalRevoked Lapse = "approval_revoked"
	LapseApprovalExpired Lapse = "approval_expired"
	LapseTokenRevoked    Lapse = "token_revoked"
	// LapseApprovalMismatch: the action's provider now points at another
	// account or environment than the approval was granted for.
	LapseApprovalMismatch Lapse = "approval_mismatch"
)

// operationLapse says whether operation $1 may still be sent now ($2):
// its approval neither revoked nor expired nor granted for another
// provider target than the current one ($3 account, $4 environment; a NULL
// $3 skips that comparison, and so does an approval older than the
// binding, whose account is NULL), and its requesting token not revoked.
const operationLapse = `SELECT operation_lapse(a, k, coalesce($2::timestamptz, now()), $3::text, $4::text)
FROM operations o
JOIN approvals a ON a.id = o.approval_id
JOIN api_tokens k ON k.id = o.requested_by
WHERE o.id = $1`

// CheckLapse tells whether operation id may still be sent: its approval
// neither revoked nor expired, and the token that asked for it not revoked.
// Workers learn the same in the statements that claim and confirm a claim
// (Claim, ConfirmClaim), right before every provider call, and there also
// whether the approval was granted for the provider target they would
// send to; CheckLapse, which knows no target, does not compare it.
func (s *Store) CheckLapse(ctx context.Context, id uuid.UUID) (Lapse, error) {
	var lapse Lapse
	if err := s.pool.QueryRow(ctx, operationLapse, id, s.nowArg(), nil, nil).Scan(&lapse); err != nil {
		return LapseNone, fmt.Errorf("check approval of %s: %w", id, err)
	}
	return lapse, nil
}
