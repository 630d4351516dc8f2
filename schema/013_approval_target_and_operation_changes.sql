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

-- operation_watches lists the operations someone waits on now
-- (GET /v1/operations/{id}?wait=…): one row per operation and per process
-- whose ledger.Watcher has waiters for it. The trigger below notifies only
-- for these, so the dispatcher's transitions of operations nobody waits on
-- never notify.
--
-- Why not notify on every transition: a committing transaction that
-- notified holds Postgres's notify-queue lock until its commit is flushed,
-- so notifying commits queue one behind another (006 took NOTIFY out of the
-- outbox's data transactions for the same reason). Measured with
-- `actbench --quick --stages e2e` on a loaded 2-core machine, a NOTIFY on
-- every version change cost 12–17 % of end-to-end throughput; with this
-- index probe of an (almost always) empty table instead, throughput stayed
-- within the noise of the baseline (docs/api.md, "Waiting for a change").
--
-- UNLOGGED: a registration is only as old as the waiters of a running
-- process; after a crash of Postgres the table is empty, and every watcher,
-- whose LISTEN connection dropped with it, registers its operations again
-- when it listens again. A process that dies leaves rows behind: they only
-- cause notifications nobody hears, and watchers delete rows not refreshed
-- for a while (ledger.Watcher).
CREATE UNLOGGED TABLE operation_watches (
    operation_id uuid NOT NULL,
    watcher      uuid NOT NULL,
    refreshed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (operation_id, watcher)
);

CREATE INDEX operation_watches_refreshed ON operation_watches (refreshed_at);

-- operation_changed tells every listener (in any process) that a watched
-- operation has a new version; the payload is its id. It fires only when
-- the version moves, which every transition and claim confirmation does,
-- so a re-publish's bookkeeping wakes nobody. Postgres delivers the
-- notification at commit, never for a rolled-back change, and folds
-- repeats of one id within a transaction into one.
--
-- A registration never misses a change: it locks the operation's row
-- FOR SHARE, which waits for a transaction that has updated the row to
-- commit (and the waiter's read that follows then sees that change), or
-- makes a later update wait until the registration is committed (and this
-- function, whose query takes a fresh snapshot, then sees it).
CREATE FUNCTION operation_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM operation_watches WHERE operation_id = NEW.id) THEN
        PERFORM pg_notify('actledger_operation', NEW.id::text);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER operation_changed
    AFTER UPDATE OF version ON operations
    FOR EACH ROW
    WHEN (OLD.version IS DISTINCT FROM NEW.version)
    EXECUTE FUNCTION operation_changed();
