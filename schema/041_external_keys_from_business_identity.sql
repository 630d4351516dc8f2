-- 041_external_keys_from_business_identity: an operation's external key
-- (the idempotency key and the reference sent to its supplier) survives
-- the loss of its row, and a key reused after a prune is the same
-- operation or a conflict (docs/contract.md, "External key";
-- docs/reliability.md, "Postgres failover").
--
-- 1. The external key of a new operation is derived from its business
--    identity (ledger.ExternalKeyOf: 'al_' and a UUIDv8 spelling of
--    SHA-256 over its tenant id, action and key), no longer 'al_' || id.
--    An operation the ledger lost (a failover to an asynchronous replica,
--    a restore) and an agent asks for again under its key gets a new id
--    and the same external key: the supplier's dedup and the lookup find
--    the first effect. Existing operations keep 'al_' || id.
--
--    015 tied the key to the id (a CHECK) and read by the id the key
--    spells, with no index on external_key. A derived key spells no id,
--    so lookups by key (evidence, statements, GetByExternalKey) need an
--    index. It is partial: only keys that are not 'al_' || id (every new
--    operation's, and an old key inherited through a tombstone, below);
--    'al_' || id is still read by the primary key. UNIQUE: one key, one
--    operation. (tenant, action, key) is unique already, so two derived
--    keys meet only if SHA-256 truncated to 122 bits collides; a derived
--    key is a version-8 UUID and an id a version-7 one, so a derived key
--    never equals an old one. Building it reads operations once under a
--    SHARE lock (a ten-million-operation ledger: seconds of writes
--    waiting) and leaves it empty: no existing row matches the predicate.
--
--    Cost on the hot path: an entry for every version of a new operation
--    (no update of operations is HOT, 015), as operations_external_key_key
--    had before 015. Measured with actbench's api and e2e stages,
--    docs/benchmarks.md, "What changed, and what each change bought".
ALTER TABLE operations DROP CONSTRAINT operations_external_key_is_id;
CREATE UNIQUE INDEX operations_external_key_idx ON operations (external_key)
    WHERE external_key <> 'al_' || id::text;

-- 2. A prune leaves a key tombstone per operation it deletes, in the
--    transaction of the delete: what a create under the same (tenant,
--    action, key) must agree with. The same params fingerprint: the new
--    operation takes the tombstone's external key (the supplier's dedup
--    answers the first effect within its retention); other params: the
--    same 409 as a live key's conflict; a scope that may not see it:
--    key_in_use_elsewhere (key_tombstone_reuse). Never a replay of the old
--    result. Tombstones are kept for at least the longest
--    idempotency.retention of the providers file, then pruned
--    (retention.Config.KeyTombstones, docs/retention.md).
--
--    One row per pruned operation, keyed by its id: a message naming a
--    pruned operation finds its tombstone (ledger_behind tells it from a
--    lost one). A key pruned twice (re-created with the same params and
--    pruned again) has two rows with the same fingerprint and external
--    key. The key's index serves the create's check, pruned_at's the
--    tombstones' own prune.
CREATE TABLE key_tombstones (
    operation_id       uuid PRIMARY KEY,
    tenant_id          uuid NOT NULL,
    action             text NOT NULL,
    key                text NOT NULL,
    params_fingerprint text NOT NULL,
    scope              text,
    external_key       text NOT NULL,
    pruned_at          timestamptz NOT NULL
);
CREATE INDEX key_tombstones_key_idx ON key_tombstones (tenant_id, action, key);
CREATE INDEX key_tombstones_pruned_at_idx ON key_tombstones (pruned_at, operation_id);

-- 3. tombstones_from: every operation pruned after it has a tombstone
--    (until the tombstone's own prune raises it to the newest pruned_at it
--    deleted). ledger.Store.MayHaveBeenPruned: an id the ledger does not
--    hold, without a tombstone, made after tombstones_from (an id's time
--    precedes its prune) was never pruned: a message naming it proves a
--    loss. A ledger that pruned before this migration kept no tombstones:
--    its row starts at the migration's time, and older ids fall back to
--    040's prune horizon. A ledger that never pruned has no row; the first
--    prune writes one whose tombstones_from is -infinity.
ALTER TABLE prune_horizon ADD COLUMN tombstones_from timestamptz NOT NULL DEFAULT '-infinity';
UPDATE prune_horizon SET tombstones_from = now();

-- 4. enqueue_operation answers the external key it stored (a tombstone's
--    may replace the derived one): a new return type, so the old function
--    goes and schema/functions/enqueue_operation.sql makes the new one.
--    A process of the previous release names its columns (e.created, …)
--    and keeps working against it; between this migration's commit and
--    the file's (the same Migrate, milliseconds apart) its enqueues fail
--    and are retried by their agents. IF EXISTS: a fresh database makes
--    its functions after every migration.
DROP FUNCTION IF EXISTS enqueue_operation(uuid, uuid, text, text, text, jsonb, text, uuid, uuid, text, timestamptz,
    text, text, text, bytea, text, text, text);
