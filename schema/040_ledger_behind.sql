-- 040_ledger_behind: a dispatch, evidence or review message that names an
-- operation the ledger does not know, or a version it never reached, is
-- proof that committed work was lost (a failover to an asynchronous
-- replica, a point-in-time restore): the messages were written in the
-- transactions the ledger no longer has. actledger then pauses dispatch
-- for every tenant (docs/reliability.md, "Postgres failover").
--
-- 1. dispatch_pauses.reason says why a pause is there: NULL for an
--    operator's stop button (every pause so far), 'ledger_behind' for the
--    pause actledger makes itself; detail names the message that proved it
--    (its kind, operation id and version). A resume removes it like any
--    pause: the claim and the resume read no new column.
ALTER TABLE dispatch_pauses
    ADD COLUMN reason text CHECK (reason IN ('ledger_behind')),
    ADD COLUMN detail text;

-- 2. prune_horizon tells a message for a pruned operation from one for a
--    lost operation. An operation's id is a UUIDv7: it holds the time the
--    operation was made, and an operation made after the last prune batch
--    that deleted anything cannot have been pruned; a message naming it,
--    unknown to the ledger, proves a loss. pruned_through is the time of
--    that batch (its transaction's now()), raised by every batch that
--    deletes operations (one row, written only by the pruner, one at a
--    time by its advisory lock). A restore takes it back with the rest, so
--    it stays consistent with the operations it speaks for. The time of
--    the batch, not the pruned operations' own times: those may be moved
--    (a backdated test ledger), the id's time may not. A ledger that
--    pruned before this migration does not know when: pruned_through
--    starts at the migration's time, so every operation made before it
--    counts as possibly pruned.
CREATE TABLE prune_horizon (
    only_row       boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    pruned_through timestamptz NOT NULL
);
INSERT INTO prune_horizon (pruned_through)
SELECT now() WHERE EXISTS (SELECT 1 FROM operations_pruned);
