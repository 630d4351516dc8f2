-- 003_reconcile: the webhook inbox, evidence that matches no operation, and
-- what the reconciler and operators need on operations.

-- webhook_events is the inbox: every verified webhook is stored here, with
-- its evidence message in the outbox, in one transaction, before the
-- provider gets its 2xx. (provider, event_id) is unique, so a repeated
-- delivery is acknowledged and ignored.
CREATE TABLE webhook_events (
    id                 bigserial PRIMARY KEY,
    provider           text NOT NULL,
    event_id           text NOT NULL CHECK (event_id <> ''),
    type               text NOT NULL,
    reference          text NOT NULL,
    provider_reference text NOT NULL,
    status             text NOT NULL CHECK (status IN ('succeeded', 'failed')),
    payload            jsonb NOT NULL,
    received_at        timestamptz NOT NULL DEFAULT now(),
    applied_at         timestamptz,
    outcome            text,
    UNIQUE (provider, event_id)
);

-- unmatched_evidence holds evidence of an effect that no operation
-- explains (a supplier order nobody here asked for): a review item of its
-- own, since there is no operation to put in review.
CREATE TABLE unmatched_evidence (
    id                 bigserial PRIMARY KEY,
    tenant_id          uuid REFERENCES tenants (id), -- NULL: shown to every tenant using the provider
    provider           text NOT NULL,
    source             text NOT NULL,
    reference          text NOT NULL,
    provider_reference text,
    status             text NOT NULL,
    detail             jsonb NOT NULL DEFAULT '{}',
    owner              text NOT NULL,
    deadline           timestamptz NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    resolved_at        timestamptz,
    resolved_by        text,
    resolution_note    text,
    UNIQUE (provider, source)
);

CREATE INDEX unmatched_evidence_open_idx ON unmatched_evidence (created_at) WHERE resolved_at IS NULL;

-- retry_base and retry_since are the attempt count and time when an
-- operator last allowed a retry: the provider's max_attempts and
-- max_elapsed count from there, so an operator's retry gets a fresh budget
-- while attempts and first_sent_at keep the whole history.
ALTER TABLE operations ADD COLUMN retry_base integer NOT NULL DEFAULT 0;
ALTER TABLE operations ADD COLUMN retry_since timestamptz;

-- Tenant names become NATS subject tokens (review.<tenant>.<reason>).
ALTER TABLE tenants ADD CONSTRAINT tenants_name_token CHECK (name ~ '^[A-Za-z0-9_-]{1,64}$');
