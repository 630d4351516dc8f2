-- provider_circuits is each provider's circuit breaker, shared by every
-- dispatcher process: consecutive attempts the provider refused or left
-- unanswered, and, once they reach the provider's breaker.failures, when
-- the circuit opened and when the next probe may go. A provider without a
-- row is closed; a success deletes its row. New claims of an open
-- provider's queued and retry_wait operations wait (no attempt is spent),
-- one probe goes out at probe_at, and the cooldown doubles while probes
-- fail. The table holds at most one row per configured provider.
CREATE TABLE provider_circuits (
    provider   text PRIMARY KEY,
    failures   integer NOT NULL CHECK (failures > 0),
    opened_at  timestamptz,
    cooldown   interval,
    probe_at   timestamptz,
    updated_at timestamptz NOT NULL,
    CHECK ((opened_at IS NULL) = (probe_at IS NULL) AND (opened_at IS NULL) = (cooldown IS NULL))
);
