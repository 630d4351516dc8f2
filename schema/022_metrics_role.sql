-- 022_metrics_role: a token of role metrics scrapes GET /metrics and
-- nothing else.
--
-- The metrics count every tenant's operations, so /metrics is not for a
-- tenant's agents, approvers or operators, and it answered anyone before
-- (each scrape also folded the counts: an anonymous request made the
-- database write). A monitoring system gets a token of its own role.
ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_role_check
    CHECK (role IN ('agent', 'approver', 'operator', 'metrics'));
