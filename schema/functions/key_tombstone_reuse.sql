-- key_tombstone_reuse: what a new operation p_id, just inserted under
-- (p_tenant, p_action, p_key) with params p_fingerprint and scope
-- p_scope, owes the operations retention pruned under that key (their key
-- tombstones, schema 041).
--
-- No tombstone: nothing; it returns NULL (the operation keeps the
-- external key it was inserted with). A tombstone of the same params: the operation takes the
-- tombstone's external key, so what its supplier sees is the pruned
-- operation's key and its dedup answers the first effect; it returns that
-- key. (A derived key is the same already; only an operation made before
-- schema 041, whose key was 'al_' || id, leaves another.) Other params:
-- SQLSTATE AL409 with message key_conflict, the same refusal as a live
-- key's conflict; a tombstone of a scope p_scope may not see: AL409 with
-- message key_in_use_elsewhere. Either rolls the insert back.
--
-- It runs after the insert, as a statement of its own, so its snapshot
-- sees a prune that committed while the insert waited on the row it
-- deleted (ON CONFLICT waits for it, then inserts): a check before the
-- insert would miss that tombstone.
--
-- requires: scope_admits
CREATE OR REPLACE FUNCTION key_tombstone_reuse(
    p_id uuid, p_tenant uuid, p_action text, p_key text, p_fingerprint text, p_scope text
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    k key_tombstones%ROWTYPE;
BEGIN
    SELECT * INTO k FROM key_tombstones
    WHERE tenant_id = p_tenant AND action = p_action AND key = p_key
    ORDER BY pruned_at DESC
    LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF NOT scope_admits(p_scope, k.scope) THEN
        RAISE EXCEPTION USING ERRCODE = 'AL409', MESSAGE = 'key_in_use_elsewhere',
            DETAIL = 'the key was a pruned operation''s of another scope';
    END IF;
    IF k.params_fingerprint <> p_fingerprint THEN
        RAISE EXCEPTION USING ERRCODE = 'AL409', MESSAGE = 'key_conflict',
            DETAIL = format('the key was operation %s''s, pruned at %s, with other params', k.operation_id,
                to_char(k.pruned_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'));
    END IF;
    UPDATE operations SET external_key = k.external_key
    WHERE id = p_id AND external_key <> k.external_key;
    RETURN k.external_key;
END;
$$;
