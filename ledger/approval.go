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
	ApproverTokenID   uuid.UUID       `db:"approver_token_id"` // uuid.Nil for a policy's approval
	ExpiresAt         time.Time       `db:"expires_at"`
	MaxUses           int             `db:"max_uses"`
	Uses              int             `db:"uses"`
	RevokedAt         *time.Time      `db:"revoked_at"`
	CreatedAt         time.Time       `db:"created_at"`
	// Approver names who decided a proposal ("approver:<name>",
	// "policy:<version>"); nil for an approval made with POST /v1/approvals.
	Approver *string `db:"approver"`
	// OperationID is the proposal the approval was granted for; uuid.Nil
	// for an approval made with POST /v1/approvals.
	OperationID uuid.UUID `db:"operation_id"`
	Note        *string   `db:"note"`
	// Account and Environment are the provider's the approval was granted
	// for; nil on approvals granted before they were recorded (schema
	// 013), which match any.
	Account     *string `db:"account"`
	Environment *string `db:"environment"`
	// Scope is the access scope of the approver who granted it (of the
	// proposal, for one granted on a proposal); nil for an approver of the
	// whole tenant. It authorises only operations of that scope, and only
	// approvers it admits may revoke it; without one it serves every scope
	// of its tenant.
	Scope *string `db:"scope"`
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
	// Scope is the approver's access scope (empty: the whole tenant's).
	Scope string
	// Target is the provider account and environment the action points at
	// as the approval is granted (the registry's config of the action's
	// provider). Required: every creator, a person's grant or a policy's,
	// binds it, and the dispatcher holds the operation (approval_mismatch)
	// if the action later points elsewhere.
	Target *Target
}

const (
	approvalColumns = `id, tenant_id, action, params, params_fingerprint, policy_version,
    approver_token_id, expires_at, max_uses, uses, revoked_at, created_at, approver, operation_id, note,
    account, environment, scope`

	// approvalInsert creates an approval only while its approver's token
	// stands, holding that token's row FOR SHARE until the transaction
	// ends (see approverTokenLock): no row when it is revoked.
	approvalInsert = `WITH approver AS (
    SELECT id FROM api_tokens WHERE id = @approver AND revoked_at IS NULL FOR SHARE
)
INSERT INTO approvals (id, tenant_id, action, params, params_fingerprint,
    policy_version, approver_token_id, expires_at, max_uses, created_at, account, environment, scope)
SELECT @id::uuid, @tenant::uuid, @action::text, @params::jsonb, @fingerprint::text, @policy_version::text, approver.id,
    @expires_at::timestamptz, @max_uses::int, coalesce(@now::timestamptz, now()), @account::text, @environment::text, @scope::text
FROM approver
RETURNING ` + approvalColumns

	// approverTokenLock reads whether the approver's token stands and
	// holds its row FOR SHARE until the deciding transaction ends. Revoking
	// a token updates that row, so the two are ordered: a revocation that
	// comes first is seen here (READ COMMITTED reads the row as the
	// revocation left it) and the decision is refused; one that comes
	// second waits for the decision's commit, and its statement that
	// revokes the approver's approvals (ledger.RevokeApprovalsOfApprover)
	// then sees the new approval and revokes it too. Without the lock, a
	// decision whose request was authenticated just before the revocation
	// committed left a standing approval of a revoked token.
	approverTokenLock = `SELECT revoked_at IS NULL FROM api_tokens WHERE id = $1 FOR SHARE`

	// approvalRevoke revokes an approval the caller ($2, $4) may see.
	approvalRevoke = `UPDATE approvals SET revoked_at = coalesce(revoked_at, coalesce($3::timestamptz, now()))
WHERE id = $1 AND tenant_id = $2 AND scope_admits($4, scope)
RETURNING ` + approvalColumns
)

// ErrNoTarget: an approval was to be created without the provider
// account and environment it is granted for.
var ErrNoTarget = errors.New("ledger: an approval needs the provider account and environment it is granted for")

// ErrApproverRevoked: the token of the person deciding was revoked before
// the decision was stored (its request was authenticated just before);
// nothing was granted.
var ErrApproverRevoked = errors.New("ledger: the approver's token was revoked; nothing was granted")

// CreateApproval stores a new approval.
func (s *Store) CreateApproval(ctx context.Context, a NewApproval) (Approval, error) {
	return s.CreateApprovalTx(ctx, s.pool, a)
}

// CreateApprovalTx is CreateApproval in the caller's transaction (an
// approval decided and used in the transaction that queues its
// operation). Every approval is created here, so every approval is bound
// to its target.
func (s *Store) CreateApprovalTx(ctx context.Context, db DBTX, a NewApproval) (Approval, error) {
	if a.Target == nil {
		return Approval{}, ErrNoTarget
	}
	canonical, fingerprint, err := Canonicalize(a.Params)
	if err != nil {
		return Approval{}, err
	}
	if a.MaxUses == 0 {
		a.MaxUses = 1
	}
	rows, _ := db.Query(ctx, approvalInsert, pgx.StrictNamedArgs{
		"id": uuid.Must(uuid.NewV7()), "tenant": a.TenantID, "action": a.Action,
		"params": canonical, "fingerprint": fingerprint, "policy_version": a.PolicyVersion,
		"approver": a.ApproverTokenID, "expires_at": a.ExpiresAt, "max_uses": a.MaxUses, "now": s.nowArg(),
		"account": a.Target.Account, "environment": a.Target.Environment, "scope": nullString(a.Scope),
	})
	approval, err := collectApproval(rows)
	if errors.Is(err, pgx.ErrNoRows) {
		return Approval{}, ErrApproverRevoked
	}
	if err != nil {
		return Approval{}, fmt.Errorf("create approval: %w", err)
	}
	return approval, nil
}

// lockApprover holds the approver's token row in tx (approverTokenLock)
// and returns ErrApproverRevoked when it is revoked or gone.
func lockApprover(ctx context.Context, tx pgx.Tx, token uuid.UUID) error {
	var stands bool
	err := tx.QueryRow(ctx, approverTokenLock, token).Scan(&stands)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || err == nil && !stands:
		return ErrApproverRevoked
	case err != nil:
		return fmt.Errorf("lock the approver's token %s: %w", token, err)
	}
	return nil
}

// collectApproval reads exactly one approval row.
func collectApproval(rows pgx.Rows) (Approval, error) {
	return pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Approval])
}

// RevokeApproval revokes approval id, which in must see, and, in the same
// transaction, holds every operation under it that was never executed
// (queued, retry_wait). An operation whose outcome is unknown is left to
// evidence: it will not be sent again because the dispatcher re-checks the
// approval before every call. It returns the operations it held.
func (s *Store) RevokeApproval(ctx context.Context, in Access, id uuid.UUID, actor string) (Approval, []Operation, error) {
	var approval Approval
	var held []Operation
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, approvalRevoke, id, in.Tenant, s.nowArg(), in.scope())
		var err error
		approval, err = collectApproval(rows)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("revoke approval %s: %w", id, err)
		}
		held, err = s.holdUnsent(ctx, tx, operationsUnsentByApproval, id, EventKind(LapseApprovalRevoked), actor)
		return err
	})
	return approval, held, err
}
