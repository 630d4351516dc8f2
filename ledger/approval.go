package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Approval binds an action and its canonical params to an expiry, a policy
// version, its approver and a number of uses.
type Approval struct {
	ID                uuid.UUID       `db:"id"`
	TenantID          uuid.UUID       `db:"tenant_id"`
	Action            string          `db:"action"`
	Params            json.RawMessage `db:"params"`
	ParamsFingerprint string          `db:"params_fingerprint"`
	PolicyVersion     string          `db:"policy_version"`
	ApproverTokenID   uuid.UUID       `db:"approver_token_id"`
	ExpiresAt         time.Time       `db:"expires_at"`
	MaxUses           int             `db:"max_uses"`
	Uses              int             `db:"uses"`
	RevokedAt         *time.Time      `db:"revoked_at"`
	CreatedAt         time.Time       `db:"created_at"`
}

// ApprovalCode is the machine-readable reason an approval cannot be used.
type ApprovalCode string

// The codes of the contract's 403 answers.
const (
	ApprovalExpired  ApprovalCode = "approval_expired"
	ApprovalRevoked  ApprovalCode = "approval_revoked"
	ApprovalUsed     ApprovalCode = "approval_used"
	ApprovalMismatch ApprovalCode = "approval_mismatch"
)

// ApprovalError says why an approval did not authorise an operation.
type ApprovalError struct {
	Code   ApprovalCode
	Reason string
}

func (e *ApprovalError) Error() string { return string(e.Code) + ": " + e.Reason }

// NewApproval is what an approver grants.
type NewApproval struct {
	TenantID        uuid.UUID
	ApproverTokenID uuid.UUID
	Action          string
	Params          []byte // any JSON object; canonicalised here
	PolicyVersion   string
	ExpiresAt       time.Time
	MaxUses         int // 0 means 1
}

const (
	approvalColumns = `id, tenant_id, action, params, params_fingerprint, policy_version,
    approver_token_id, expires_at, max_uses, uses, revoked_at, created_at`

	approvalInsert = `INSERT INTO approvals (id, tenant_id, action, params, params_fingerprint,
    policy_version, approver_token_id, expires_at, max_uses, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10::timestamptz, now()))
RETURNING ` + approvalColumns

	approvalGet = `SELECT ` + approvalColumns + ` FROM approvals WHERE id = $1 AND tenant_id = $2`

	approvalRevoke = `UPDATE approvals SET revoked_at = coalesce(revoked_at, coalesce($3::timestamptz, now()))
WHERE id = $1 AND tenant_id = $2
RETURNING ` + approvalColumns

	// approvalConsume takes one use of an approval if it still authorises
	// exactly this action and these params. The row lock makes concurrent
	// consumers queue; each re-checks uses < max_uses on the newest row.
	approvalConsume = `UPDATE approvals SET uses = uses + 1
WHERE id = $1 AND tenant_id = $2 AND action = $3 AND params_fingerprint = $4
  AND revoked_at IS NULL AND expires_at > coalesce($5::timestamptz, now()) AND uses < max_uses
RETURNING id`

	approvalValidAt = `SELECT revoked_at IS NULL AND expires_at > coalesce($2::timestamptz, now())
FROM approvals WHERE id = $1`
)

// CreateApproval stores a new approval.
func (s *Store) CreateApproval(ctx context.Context, a NewApproval) (Approval, error) {
	canonical, fingerprint, err := Canonicalize(a.Params)
	if err != nil {
		return Approval{}, err
	}
	if a.MaxUses == 0 {
		a.MaxUses = 1
	}
	rows, _ := s.pool.Query(ctx, approvalInsert, uuid.Must(uuid.NewV7()), a.TenantID, a.Action,
		canonical, fingerprint, a.PolicyVersion, a.ApproverTokenID, a.ExpiresAt, a.MaxUses, s.nowArg())
	approval, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Approval])
	if err != nil {
		return Approval{}, fmt.Errorf("create approval: %w", err)
	}
	return approval, nil
}

// GetApproval returns approval id of tenant, or ErrNotFound.
func (s *Store) GetApproval(ctx context.Context, tenant, id uuid.UUID) (Approval, error) {
	rows, _ := s.pool.Query(ctx, approvalGet, id, tenant)
	approval, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Approval])
	if errors.Is(err, pgx.ErrNoRows) {
		return Approval{}, ErrNotFound
	}
	if err != nil {
		return Approval{}, fmt.Errorf("get approval %s: %w", id, err)
	}
	return approval, nil
}

// ApprovalValid reports whether approval id is neither revoked nor expired
// now. The dispatcher asks right before every provider call.
func (s *Store) ApprovalValid(ctx context.Context, db DBTX, id uuid.UUID) (bool, error) {
	var valid bool
	if err := db.QueryRow(ctx, approvalValidAt, id, s.nowArg()).Scan(&valid); err != nil {
		return false, fmt.Errorf("check approval %s: %w", id, err)
	}
	return valid, nil
}

// RevokeApproval revokes approval id of tenant and, in the same
// transaction, holds every operation under it that was never executed
// (queued, retry_wait). An operation whose outcome is unknown is left to
// evidence: it will not be sent again because the dispatcher re-checks the
// approval before every call. It returns the operations it held.
func (s *Store) RevokeApproval(ctx context.Context, tenant, id uuid.UUID, actor string) (Approval, []Operation, error) {
	var approval Approval
	var held []Operation
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, approvalRevoke, id, tenant, s.nowArg())
		var err error
		approval, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Approval])
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("revoke approval %s: %w", id, err)
		}
		held, err = s.holdUnsent(ctx, tx, operationsUnsentByApproval, id, "approval_revoked", actor)
		return err
	})
	return approval, held, err
}

// consumeApproval takes one use of the approval for a new operation, or
// explains with an *ApprovalError why it cannot.
func (s *Store) consumeApproval(ctx context.Context, tx pgx.Tx, tenant, id uuid.UUID, action, fingerprint string) error {
	var got uuid.UUID
	err := tx.QueryRow(ctx, approvalConsume, id, tenant, action, fingerprint, s.nowArg()).Scan(&got)
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("consume approval %s: %w", id, err)
	}
	rows, _ := tx.Query(ctx, approvalGet, id, tenant)
	a, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Approval])
	if errors.Is(err, pgx.ErrNoRows) {
		return &ApprovalError{Code: ApprovalMismatch, Reason: "no such approval"}
	}
	if err != nil {
		return fmt.Errorf("read approval %s: %w", id, err)
	}
	return explainApproval(a, action, fingerprint, s.Now())
}

// explainApproval names the first reason, in the contract's order of
// severity, why a could not authorise action with fingerprint at now.
func explainApproval(a Approval, action, fingerprint string, now time.Time) *ApprovalError {
	switch {
	case a.RevokedAt != nil:
		return &ApprovalError{Code: ApprovalRevoked, Reason: "the approval was revoked"}
	case !a.ExpiresAt.After(now):
		return &ApprovalError{Code: ApprovalExpired, Reason: "the approval expired at " + a.ExpiresAt.UTC().Format(time.RFC3339)}
	case a.Action != action:
		return &ApprovalError{Code: ApprovalMismatch, Reason: fmt.Sprintf("the approval is for action %q", a.Action)}
	case a.ParamsFingerprint != fingerprint:
		return &ApprovalError{Code: ApprovalMismatch, Reason: "params are not those approved"}
	default:
		return &ApprovalError{Code: ApprovalUsed, Reason: fmt.Sprintf("the approval's %d use(s) are taken", a.MaxUses)}
	}
}
