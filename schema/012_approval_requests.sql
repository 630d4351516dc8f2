-- 012_approval_requests: an agent proposes, a person or a policy decides.
--
-- A proposal is already the operation (one identity from the first
-- moment): it is stored in the new state awaiting_approval without an
-- approval and without an outbox row, and nothing can send it. A decision
-- either binds a new approval to it and queues it with its outbox row
-- (ledger.ApproveRequest), or cancels it with the approver's reason
-- (ledger.DenyRequest). A proposal that waits past its request_ttl, or
-- whose requesting token is revoked, is held.

-- The state set mirrors ledger.Statuses (TestSchemaStatesMatchTransitionTable).
ALTER TABLE operations DROP CONSTRAINT operations_status_check;
ALTER TABLE operations ADD CONSTRAINT operations_status_check CHECK (status IN (
    'awaiting_approval', 'queued', 'dispatching', 'retry_wait', 'unknown', 'succeeded',
    'failed', 'held', 'review', 'cancelled'));

-- A proposal has no approval until it is decided; one denied or expired
-- never gets one. Every state that may send has one.
ALTER TABLE operations ALTER COLUMN approval_id DROP NOT NULL;
ALTER TABLE operations ADD CONSTRAINT operations_approval_required
    CHECK (approval_id IS NOT NULL OR status IN ('awaiting_approval', 'held', 'cancelled'));

-- request_reason: the agent's one sentence for the approver.
-- request_expires_at: when an undecided proposal is held (its action's
-- request_ttl after it was made); NULL for an operation that came with an
-- approval.
-- decision_reason: why a person declined it, for the agent's summary.
ALTER TABLE operations
    ADD COLUMN request_reason     text,
    ADD COLUMN request_expires_at timestamptz,
    ADD COLUMN decision_reason    text;

-- The approver's queue (GET /v1/approval-requests: a tenant's open
-- proposals, oldest first) and the expiry sweep read only open proposals.
CREATE INDEX operations_awaiting_approval_idx ON operations (tenant_id, created_at, id)
    WHERE status = 'awaiting_approval';
CREATE INDEX operations_request_expiry_idx ON operations (request_expires_at)
    WHERE status = 'awaiting_approval';

-- An approval granted to a proposal names the operation it was granted
-- for and who decided: "approver:<token name>" for a person, or
-- "policy:<policy_version>" for the action's auto_approve policy, which
-- has no token (approver_token_id is then NULL). Approvals made with POST
-- /v1/approvals keep naming their token and have no operation.
ALTER TABLE approvals ALTER COLUMN approver_token_id DROP NOT NULL;
ALTER TABLE approvals
    ADD COLUMN approver     text,
    ADD COLUMN operation_id uuid,
    ADD COLUMN note         text;
ALTER TABLE approvals ADD CONSTRAINT approvals_approver_known
    CHECK (approver_token_id IS NOT NULL OR approver LIKE 'policy:%');
