-- 010_evidence_rows: NATS carries pointers, Postgres holds the facts.
--
-- stale_results keeps what a fenced worker saw (a success it may no longer
-- record itself): the evidence message names a row here, and the
-- reconciler applies the row, never the message's own content. The
-- operation's provider and external key are taken from the operation when
-- the row is written, not from anything the worker or a message says.
CREATE TABLE stale_results (
    id                 bigserial PRIMARY KEY,
    operation_id       uuid NOT NULL REFERENCES operations (id),
    provider           text NOT NULL,
    provider_reference text NOT NULL CHECK (provider_reference <> ''),
    worker             text NOT NULL,
    recorded_at        timestamptz NOT NULL DEFAULT now(),
    -- Set once by the reconciler; NULL means not applied yet.
    applied_at         timestamptz,
    outcome            text,
    -- The evidence sweep's bookkeeping: how often it applied the row from
    -- Postgres (its message never arrived) and when it may look again.
    sweeps             integer NOT NULL DEFAULT 0,
    next_sweep_at      timestamptz,
    -- A fenced worker that records the same result twice stores one row.
    UNIQUE (operation_id, provider_reference)
);

CREATE INDEX stale_results_unapplied_idx ON stale_results (id) WHERE applied_at IS NULL;

-- Webhook events get the same sweep bookkeeping: an event whose evidence
-- message JetStream lost (node loss, MaxAge) is applied from this table
-- after a bound, with a backoff per row so that a row that cannot be
-- applied yet is not retried every sweep.
ALTER TABLE webhook_events ADD COLUMN sweeps integer NOT NULL DEFAULT 0;
ALTER TABLE webhook_events ADD COLUMN next_sweep_at timestamptz;

CREATE INDEX webhook_events_unapplied_idx ON webhook_events (id) WHERE applied_at IS NULL;

-- Unmatched evidence without a tenant is no longer shown to every tenant:
-- providers that send webhooks must name their tenant (provider config),
-- and a row without one is visible to no tenant's operators.
COMMENT ON COLUMN unmatched_evidence.tenant_id IS 'owning tenant; NULL: no tenant sees it (never shown across tenants)';

-- Review subjects name the tenant by its id (uuid::text), not by a lossy
-- token of its name, which let "acme.eu" and "acme_eu" share a subject.
-- subject_token (007) has no user left.
DROP FUNCTION subject_token(text);
