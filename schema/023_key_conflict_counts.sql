-- 023_key_conflict_counts: a key conflict is one event, then a count.
--
-- Every 409 key_reused_with_different_params appended a key_conflict
-- event, so a caller repeating a conflicting request made one operation's
-- history grow without bound (and review pages load whole histories). Now
-- the first conflict of an operation is its event, and every conflict,
-- the first included, is counted here (ledger.Store.recordKeyConflict,
-- one statement for both); the history shows the count on that event.
CREATE TABLE operation_key_conflicts (
    operation_id uuid PRIMARY KEY REFERENCES operations (id) ON DELETE CASCADE,
    conflicts    bigint NOT NULL CHECK (conflicts > 0),
    first_at     timestamptz NOT NULL,
    last_at      timestamptz NOT NULL
);
