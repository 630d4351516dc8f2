-- operation_events_append_only: the history of an operation is only
-- ever appended to.
--
-- The trigger operation_events_append_only (schema 001) calls it before
-- every UPDATE or DELETE of operation_events, which it refuses.
CREATE OR REPLACE FUNCTION operation_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'operation_events is append-only';
END;
$$;
