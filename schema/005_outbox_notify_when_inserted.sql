-- 005_outbox_notify_when_inserted: wake relays only when rows were added.
--
-- A transaction that calls pg_notify holds Postgres's notify-queue lock
-- until its commit is flushed, so notifying commits queue behind one another
-- instead of sharing a flush. The statement trigger of 001 also fired for
-- INSERTs that added nothing (the review CTE of every transition), putting
-- every claim and result behind that lock. It now notifies only when the
-- statement inserted at least one row.
DROP TRIGGER outbox_notify ON outbox;

CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM inserted) THEN
        PERFORM pg_notify('actledger_outbox', '');
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER outbox_notify
    AFTER INSERT ON outbox
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
