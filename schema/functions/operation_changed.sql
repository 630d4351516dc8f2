-- operation_changed: every change of a watched operation is announced to
-- the readers waiting for it.
--
-- It tells every listener (in any process) that a watched operation has a
-- new version; the payload is its id. It runs once per statement (the
-- statement trigger operation_changed, schema 015, over the transition
-- tables old_rows and new_rows) and notifies every operation of the
-- statement whose version moved and that operation_watches lists. The
-- version moves with every transition and claim confirmation, so a
-- re-publish's bookkeeping wakes nobody. A transition table cannot be
-- limited to a column (UPDATE OF version), so old and new rows are paired
-- by id. Postgres delivers the notification at commit, never for a
-- rolled-back change, and folds repeats of one id within a transaction
-- into one.
--
-- A registration never misses a change: it locks the operation's row
-- FOR SHARE, which waits for a transaction that has updated the row to
-- commit (and the waiter's read that follows then sees that change), or
-- makes a later update wait until the registration is committed (and this
-- function, whose query takes a fresh snapshot after the statement's rows
-- are written, then sees it).
--
-- Why only watched operations, and why operation_watches is UNLOGGED:
-- schema 013.
--
-- It runs a statement per write: planned once (plan_cache_mode), not once
-- per write.
CREATE OR REPLACE FUNCTION operation_changed() RETURNS trigger LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM pg_notify('actledger_operation', n.id::text)
    FROM new_rows n
    JOIN old_rows o ON o.id = n.id
    WHERE n.version IS DISTINCT FROM o.version
      AND EXISTS (SELECT 1 FROM operation_watches w WHERE w.operation_id = n.id);
    RETURN NULL;
END;
$$;
