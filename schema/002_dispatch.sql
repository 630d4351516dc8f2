-- 002_dispatch: scheduled outbox messages and the dispatch stop button.

-- deliver_after holds a message back until its time: a retry's backoff, or
-- the moment a lookup's "absent" can be believed. The schedule lives in
-- Postgres, so a restart neither loses nor hurries it.
ALTER TABLE outbox ADD COLUMN deliver_after timestamptz;

CREATE INDEX outbox_scheduled_idx ON outbox (deliver_after)
    WHERE published_at IS NULL AND deliver_after IS NOT NULL;

-- dispatch_pauses is the stop button: while a row matches an operation
-- (NULL provider or action matches any), no worker may claim it. Claims
-- check it in the same statement, so a pause takes effect at once.
CREATE TABLE dispatch_pauses (
    id         bigserial PRIMARY KEY,
    tenant_id  uuid NOT NULL REFERENCES tenants (id),
    provider   text,
    action     text,
    paused_by  text NOT NULL,
    paused_at  timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX dispatch_pauses_scope_idx
    ON dispatch_pauses (tenant_id, coalesce(provider, ''), coalesce(action, ''));

-- Lease expiry and stuck-message sweeps scan by these.
CREATE INDEX operations_lease_idx ON operations (lease_expires_at) WHERE status = 'dispatching';
CREATE INDEX operations_due_idx ON operations (next_attempt_at) WHERE status IN ('retry_wait', 'unknown');
