-- 009_redispatch_backoff: the stuck-dispatch sweeper backs off per operation.
--
-- An operation whose dispatch message never arrives is re-published by the
-- sweeper. If the new message is lost or dropped again, the operation stays
-- stuck, and without a record of the last re-publish it was published again
-- on every sweep (once a second). redispatched_at is when the sweeper last
-- re-published it and redispatches how often since the operation last
-- changed (updated_at; a re-publish does not change it): the next
-- re-publish waits the sweep interval doubled per re-publish, at most
-- 5 minutes. Each re-publish is also an operation event ("redispatched").
ALTER TABLE operations
    ADD COLUMN redispatched_at timestamptz,
    ADD COLUMN redispatches    integer NOT NULL DEFAULT 0;
