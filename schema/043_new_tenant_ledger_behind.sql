-- 043_new_tenant_ledger_behind: a tenant made while dispatch is paused
-- because the ledger is behind (schema 040) is paused too, whichever path
-- makes it (ledger.Store.EnsureTenant, auth's token creation): one trigger
-- on the table both insert into.
--
-- requires: tenants_inherit_ledger_behind
CREATE TRIGGER tenants_inherit_ledger_behind
    AFTER INSERT ON tenants
    FOR EACH ROW EXECUTE FUNCTION tenants_inherit_ledger_behind();
