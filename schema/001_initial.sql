-- 001_initial: tenants, tokens, approvals, operations, their events, and the outbox.
--
-- Postgres is the source of truth for actledger: every dedup rule that
-- matters (one operation per tenant+action+key, one use per approval) is a
-- constraint here, not only a check in Go.

CREATE TABLE tenants (
    id         uuid PRIMARY KEY,
    name       text NOT NULL UNIQUE CHECK (name <> ''),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- API tokens are stored as SHA-256 hashes only. Tokens are 256-bit random
-- strings, so a fast hash is enough: nothing here can be brute-forced.
CREATE TABLE api_tokens (
    id         uuid PRIMARY KEY,
    tenant_id  uuid NOT NULL REFERENCES tenants (id),
    name       text NOT NULL UNIQUE CHECK (name <> ''),
    role       text NOT NULL CHECK (role IN ('agent', 'approver', 'operator')),
    token_hash bytea NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);

-- An approval binds an action and its canonical params (by fingerprint) to
-- an expiry, a policy version, the approver and a number of uses. The CHECK
-- on uses makes over-consumption impossible even under concurrency.
CREATE TABLE approvals (
    id                 uuid PRIMARY KEY,
    tenant_id          uuid NOT NULL REFERENCES tenants (id),
    action             text NOT NULL,
    params             jsonb NOT NULL,
    params_fingerprint text NOT NULL,
    policy_version     text NOT NULL,
    approver_token_id  uuid NOT NULL REFERENCES api_tokens (id),
    expires_at         timestamptz NOT NULL,
    max_uses           integer NOT NULL DEFAULT 1 CHECK (max_uses > 0),
    uses               integer NOT NULL DEFAULT 0 CHECK (uses >= 0 AND uses <= max_uses),
    revoked_at         timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now()
);

-- operations is the ledger. status mirrors ledger.Status (one transition
-- table in Go); version is the fencing token every state change is
-- conditional on; lease_* say which worker may be calling the provider.
CREATE TABLE operations (
    id                   uuid PRIMARY KEY,
    tenant_id            uuid NOT NULL REFERENCES tenants (id),
    action               text NOT NULL,
    key                  text NOT NULL CHECK (key <> ''),
    provider             text NOT NULL,
    params               jsonb NOT NULL,
    params_fingerprint   text NOT NULL,
    approval_id          uuid NOT NULL REFERENCES approvals (id),
    requested_by         uuid NOT NULL REFERENCES api_tokens (id),
    external_key         text NOT NULL UNIQUE,
    status               text NOT NULL CHECK (status IN (
                             'queued', 'dispatching', 'retry_wait', 'unknown', 'succeeded',
                             'failed', 'held', 'review', 'cancelled')),
    version              bigint NOT NULL DEFAULT 1,
    attempts             integer NOT NULL DEFAULT 0,
    lease_owner          text,
    lease_expires_at     timestamptz,
    next_attempt_at      timestamptz,
    first_sent_at        timestamptz,
    last_sent_at         timestamptz,
    provider_reference   text,
    review_reason        text,
    review_owner         text,
    review_deadline      timestamptz,
    flags                text[] NOT NULL DEFAULT '{}',
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, action, key),
    -- a lease exists exactly while an operation is being dispatched
    CHECK ((status = 'dispatching') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    -- review items always say why and who owns them
    CHECK (status <> 'review' OR (review_reason IS NOT NULL AND review_owner IS NOT NULL))
);

CREATE INDEX operations_approval_idx ON operations (approval_id);
CREATE INDEX operations_requested_by_idx ON operations (requested_by);
CREATE INDEX operations_open_idx ON operations (status, updated_at)
    WHERE status IN ('queued', 'dispatching', 'retry_wait', 'unknown', 'review');

-- operation_events is append-only history: who/what moved an operation
-- from which state to which, with the evidence. Events that change no state
-- (a conflict, a stale worker's late answer) have from_status = to_status.
CREATE TABLE operation_events (
    seq          bigserial PRIMARY KEY,
    operation_id uuid NOT NULL REFERENCES operations (id),
    tenant_id    uuid NOT NULL REFERENCES tenants (id),
    at           timestamptz NOT NULL DEFAULT now(),
    kind         text NOT NULL,
    from_status  text,
    to_status    text NOT NULL,
    actor        text NOT NULL,
    detail       jsonb NOT NULL DEFAULT '{}'
);

CREATE INDEX operation_events_operation_idx ON operation_events (operation_id, seq);

CREATE FUNCTION operation_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'operation_events is append-only';
END;
$$;

CREATE TRIGGER operation_events_append_only
    BEFORE UPDATE OR DELETE ON operation_events
    FOR EACH ROW EXECUTE FUNCTION operation_events_append_only();

-- outbox holds messages written in the same transaction as the state they
-- announce. The relay publishes unpublished rows to JetStream with msg_id as
-- Nats-Msg-Id and only then sets published_at.
CREATE TABLE outbox (
    id           bigserial PRIMARY KEY,
    subject      text NOT NULL,
    msg_id       text NOT NULL,
    payload      bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz
);

CREATE INDEX outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL;

-- Wake relays once per inserting statement; the relay also polls, so a
-- lost notification only delays a message, never loses it.
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('actledger_outbox', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER outbox_notify
    AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
