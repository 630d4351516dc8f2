-- 019_client_key: the key a caller sent, kept beside the business key.
--
-- An action may declare a business key (the providers file's "key", a CEL
-- expression over the params): the server then derives the operation's
-- key from the params, whatever the caller sends, so a re-planning agent
-- that invents a new key for the same purchase order gets the same
-- operation. The caller's own key (a tool-call id, a conversation id) is
-- kept here, for tracing only: nothing is unique on it and no rule reads
-- it. NULL when the caller sent none, and for every operation of an
-- action without a business key (its key is the caller's).
ALTER TABLE operations ADD COLUMN client_key text;
-- NOT VALID: every existing row is NULL, so there is nothing to check,
-- and the constraint holds for every row written from now on without a
-- scan of the ledger under the table's lock.
ALTER TABLE operations ADD CONSTRAINT operations_client_key_check CHECK (client_key <> '') NOT VALID;

-- The functions that write and return operations take and give it: the
-- enqueues a new last argument p_client_key (defaulting to NULL, so a
-- call that names its arguments without it still works), and
-- transition_operations a client_key column in its result. Neither change
-- can be made by CREATE OR REPLACE (a new argument list makes a second
-- function; a new result column is another return type), so the old
-- definitions go here and their files create the new ones.
DROP FUNCTION enqueue_operation(
    uuid, uuid, text, text, text, jsonb,
    text, uuid, uuid, text, timestamptz,
    text, text, text, bytea);

DROP FUNCTION enqueue_operations(
    uuid[], uuid[], text[], text[], text[], jsonb[],
    text[], uuid[], uuid[], text[], timestamptz,
    text[], text[], text[], bytea[]);

DROP FUNCTION transition_operations(
    uuid[], bigint[], text[], text[],
    text[], timestamptz[], bigint[],
    boolean[], boolean[],
    timestamptz[], boolean[], timestamptz[], timestamptz[],
    text[], text[],
    text[], text[], timestamptz[],
    boolean[], text[], text[], jsonb[],
    uuid[], text[],
    boolean[], text[], text[],
    text[],
    timestamptz, text);
