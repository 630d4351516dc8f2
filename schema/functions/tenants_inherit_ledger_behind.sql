-- tenants_inherit_ledger_behind: a tenant made while the ledger is behind
-- its messages is paused with the others.
--
-- The trigger tenants_inherit_ledger_behind (schema 043) calls it after
-- each tenant is inserted. A ledger_behind pause (schema 040) stops the
-- dispatch of every tenant there is when the loss is proven; a tenant
-- made afterwards (a token created for it, a provider naming it) would
-- otherwise dispatch while the window is unsettled, and its operations
-- may be the lost ones asked for again. The new tenant gets the first
-- proof's pause, with its detail, made by actledger (never by the
-- operator of the tenant whose pause it copies: a recovery lifts
-- actledger's pauses and keeps the operators'); ledger.PauseLedgerBehind
-- is the reason's
-- spelling in Go (TestATenantMadeWhileTheLedgerIsBehindIsPausedToo holds
-- the two together).
CREATE OR REPLACE FUNCTION tenants_inherit_ledger_behind() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dispatch_pauses (tenant_id, provider, action, paused_by, paused_at, reason, detail)
    SELECT NEW.id, NULL, NULL, 'actledger', now(), p.reason, p.detail
    FROM dispatch_pauses p
    WHERE p.reason = 'ledger_behind'
    ORDER BY p.paused_at
    LIMIT 1
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END;
$$;
