-- 008_unsent_indexes: index approvals and tokens only where they are used.
--
-- Operations are looked up by approval or by requesting token only to hold
-- the ones never sent (queued, retry_wait) when that approval or token is
-- revoked. Full indexes made every state change of every operation add an
-- entry to both (a status change is never a HOT update); partial ones are
-- written only while an operation waits to be sent.
DROP INDEX operations_approval_idx;
DROP INDEX operations_requested_by_idx;
CREATE INDEX operations_unsent_approval_idx ON operations (approval_id)
    WHERE status IN ('queued', 'retry_wait');
CREATE INDEX operations_unsent_requested_by_idx ON operations (requested_by)
    WHERE status IN ('queued', 'retry_wait');
