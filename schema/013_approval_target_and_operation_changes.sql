-- 013_approval_target_and_operation_changes: approvals bind the provider
-- account and environment they were granted for; every change of an
-- operation is announced to waiting readers.

-- account and environment are the provider's (providers file: "account",
-- "environment") that the approval's action pointed at when it was granted.
-- A worker compares them with the provider's current ones in the statements
-- that claim an operation and confirm the claim before each call; if the
-- providers file now points the action elsewhere, the operation is held
-- (approval_mismatch) and nothing is sent to the new account.
--
-- Approvals granted before this migration have no binding (both NULL): the
-- account they were granted for was never recorded, and binding them now to
-- whatever the file says today would pretend to know it. They are treated as
-- matching any account (legacy), exactly as before; every approval created
-- from now on carries both (the Go API requires them).
ALTER TABLE approvals
    ADD COLUMN account text,
    ADD COLUMN environment text,
    ADD CONSTRAINT approvals_target_whole CHECK ((account IS NULL) = (environment IS NULL));

COMMENT ON COLUMN approvals.account IS
    'provider account the approval was granted for; NULL only on approvals older than migration 013 (matches any)';
COMMENT ON COLUMN approvals.environment IS
    'provider environment the approval was granted for; NULL only on approvals older than migration 013 (matches any)';

-- operation_changed tells every listener (GET /v1/operations/{id}?wait=…,
-- in any process) that an operation has a new version; the payload is its
-- id. It fires only when the version moves, which every transition and claim
-- confirmation does, so a re-publish bookkeeping update wakes nobody.
-- Postgres delivers the notification at commit, never for a rolled-back
-- change, and folds repeats of one id within a transaction into one.
--
-- Cost: a committing transaction that notified holds Postgres's
-- notify-queue lock until its commit is flushed. Enqueues insert, so they
-- never notify and keep sharing their flushes; the updates the dispatcher
-- makes are group-committed already (many transitions per commit), so the
-- lock is taken once per batch, not once per transition. docs/api.md
-- ("Waiting for a change") has the measurement.
CREATE FUNCTION operation_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('actledger_operation', NEW.id::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER operation_changed
    AFTER UPDATE OF version ON operations
    FOR EACH ROW
    WHEN (OLD.version IS DISTINCT FROM NEW.version)
    EXECUTE FUNCTION operation_changed();
