-- operation_counts_reset: TRUNCATE fires no row triggers, so the counts
-- start again from nothing.
--
-- The statement trigger operation_counts_truncate (schema 011) calls it
-- after a TRUNCATE of operations; operation_counts_track keeps the counts
-- of every other write.
CREATE OR REPLACE FUNCTION operation_counts_reset() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM operation_count_deltas;
    DELETE FROM operation_counts;
    RETURN NULL;
END;
$$;
