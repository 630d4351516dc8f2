-- operation_events_append_only: the history of an operation is only
-- ever appended to, except by the retention pruner.
--
-- The trigger operation_events_append_only (schema 001) calls it before
-- every UPDATE or DELETE of operation_events. It refuses every UPDATE,
-- and every DELETE unless the transaction set actledger.prune to 'on'
-- (schema 031): the pruner's batch, which deletes the histories of the
-- terminal operations it archived (retention.Pruner) and nothing else.
CREATE OR REPLACE FUNCTION operation_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('actledger.prune', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'operation_events is append-only';
END;
$$;
