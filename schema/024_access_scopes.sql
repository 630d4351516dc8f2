-- 024_access_scopes: access scopes inside a tenant (a department, a team).
--
-- A token may have a scope. An operation takes the scope of the token that
-- proposed or requested it (a compensation, the scope of the operation it
-- compensates), and an approval the scope of the approver who granted it
-- (one granted on a proposal, the proposal's). A token with a scope sees
-- and acts on its own scope's operations, approval requests, review items
-- and events only; a token without one (NULL) sees its whole tenant, as
-- before. Every existing token and operation is NULL: nothing changes for
-- them. The rule itself is one function, scope_admits
-- (functions/scope_admits.sql), which every query that reads or decides
-- for a caller asks beside its tenant.
--
-- Business keys stay unique per tenant, not per scope: UNIQUE (tenant_id,
-- action, key) is unchanged, so a second department's request for the
-- same purchase order finds the first department's operation (and is
-- refused without being told anything of it).
ALTER TABLE api_tokens ADD COLUMN scope text
    CONSTRAINT api_tokens_scope_check CHECK (scope <> '' AND char_length(scope) <= 64);
-- NOT VALID: every existing row is NULL, so there is nothing to check, and
-- the constraints hold for every row written from now on without a scan
-- of the ledger under the table's lock (as 019's client_key).
ALTER TABLE operations ADD COLUMN scope text;
ALTER TABLE operations ADD CONSTRAINT operations_scope_check CHECK (scope <> '') NOT VALID;
ALTER TABLE approvals ADD COLUMN scope text;
ALTER TABLE approvals ADD CONSTRAINT approvals_scope_check CHECK (scope <> '') NOT VALID;

-- The enqueues take a new last argument p_scope (defaulting to NULL, so a
-- call that names its arguments without it still works) and
-- transition_operations gives a scope column in its result. Neither
-- change can be made by CREATE OR REPLACE (a new argument list makes a
-- second function; a new result column is another return type), so the
-- old definitions go here and their files create the new ones. IF EXISTS:
-- those definitions came from the function files, which run after the
-- migrations, so a database migrated from scratch never had them.
DROP FUNCTION IF EXISTS enqueue_operation(
    uuid, uuid, text, text, text, jsonb,
    text, uuid, uuid, text, timestamptz,
    text, text, text, bytea, text);

DROP FUNCTION IF EXISTS enqueue_operations(
    uuid[], uuid[], text[], text[], text[], jsonb[],
    text[], uuid[], uuid[], text[], timestamptz,
    text[], text[], text[], bytea[], text[]);

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
