-- 030_trace_context: the W3C trace context an operation was requested in.
--
-- With tracing on, the request that enqueues or proposes an operation
-- opens a trace; the operation keeps its context (a W3C traceparent,
-- "00-<trace id>-<span id>-<flags>") so that every later step of it (the
-- relay's publish, each claim and provider call, a redispatch after a
-- retry or a resume, the apply of a webhook) joins that one trace, in
-- whichever process runs it. Each outbox row carries the context of its
-- operation, and the relay sends it as the message's traceparent header.
--
-- NULL when tracing is off: the hot path writes nothing more then. The
-- column decides nothing; it is read for tracing and for the operation
-- view's trace_id. No constraint and no index: never queried by value.
ALTER TABLE operations ADD COLUMN traceparent text;
ALTER TABLE outbox ADD COLUMN traceparent text;

-- The enqueues take a new last argument p_traceparent and
-- transition_operations gives a traceparent column in its result: neither
-- can be made by CREATE OR REPLACE, so the old definitions go here and
-- their files create the new ones (as in 024).
DROP FUNCTION IF EXISTS enqueue_operation(
    uuid, uuid, text, text, text, jsonb,
    text, uuid, uuid, text, timestamptz,
    text, text, text, bytea, text, text);

DROP FUNCTION IF EXISTS enqueue_operations(
    uuid[], uuid[], text[], text[], text[], jsonb[],
    text[], uuid[], uuid[], text[], timestamptz,
    text[], text[], text[], bytea[], text[], text[]);

DROP FUNCTION IF EXISTS transition_operations(
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
