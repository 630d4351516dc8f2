-- scope_admits: whether a caller of access scope p_access may see and act
-- on an object of scope p_scope, inside one tenant (schema 024).
--
-- The rule of access scopes, stated once: a caller without a scope (NULL)
-- sees its whole tenant; a caller with one sees exactly the objects of that
-- scope, and no object without a scope (an operation an unscoped token
-- requested, evidence that matches no operation), since those may be any
-- department's business. The tenant is checked beside it, always: scopes
-- only ever narrow a tenant.
--
-- Every ledger query that reads or decides for a request asks it (the
-- operation, its events, the lists and their pages, the review queue,
-- proposals, approvals), and so do the enqueues for an approval, which acts
-- like its approver: an approval without a scope authorises an operation
-- of any scope of its tenant, one with a scope only operations of that
-- scope. A plain SQL function, so the planner inlines it into each query.
CREATE OR REPLACE FUNCTION scope_admits(p_access text, p_scope text)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_access IS NULL OR coalesce(p_scope = p_access, false)
$$;
