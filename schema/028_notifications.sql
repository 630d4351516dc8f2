-- 028_notifications: signed notifications to people and systems
-- (approval.requested, review.opened, operation.settled).
--
-- notification_receivers holds the receivers of the providers file's
-- notifications: key, as a process synced them at start (ledger.Store.
-- SyncReceivers). The writers of operations read it in the transaction of
-- the change: an event gets its notification row, and its outbox row, only
-- when some receiver of the operation's tenant subscribes to its type. A
-- deployment without notifications writes nothing more than before: the
-- check is one probe of an empty table's index.
--
-- subject is where the tenant's notification messages are published,
-- <prefix>.notify.<tenant id>, followed by .<type>; the process that syncs
-- the receivers knows its stream prefix, the SQL writers do not.
-- created_at is when the receiver first appeared: it hears the events from
-- then on, not the older ones still in the stream for other receivers.
CREATE TABLE notification_receivers (
    name       text PRIMARY KEY,
    tenant_id  uuid NOT NULL REFERENCES tenants (id),
    events     text[] NOT NULL CHECK (cardinality(events) > 0),
    subject    text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX notification_receivers_tenant_idx ON notification_receivers (tenant_id);

-- notifications are the events themselves, written in the transaction of
-- the change that causes them. id is the event's id: the message's
-- Nats-Msg-Id and the webhook-id of every attempt to every receiver. The
-- message on the stream names this row; the body a receiver gets is built
-- from it and from the operation (ids and words, never params or supplier
-- answers). operation_id is NULL for unmatched evidence (evidence_id).
-- status is the operation's state the event reports. operation_id and
-- evidence_id are not foreign keys: a notification whose operation is gone
-- is dropped by the worker.
CREATE TABLE notifications (
    id           uuid PRIMARY KEY,
    tenant_id    uuid NOT NULL REFERENCES tenants (id),
    type         text NOT NULL CHECK (type IN ('approval.requested', 'review.opened', 'operation.settled')),
    operation_id uuid,
    evidence_id  bigint,
    status       text NOT NULL,
    at           timestamptz NOT NULL,
    CHECK ((operation_id IS NULL) <> (evidence_id IS NULL))
);

-- A pruned operation's notifications go with it (ledger/prune.go), found
-- by this index; it is written only for notifications, never when no
-- receiver is configured.
CREATE INDEX notifications_operation_idx ON notifications (operation_id) WHERE operation_id IS NOT NULL;

-- notification_deliveries is what happened to one event at one receiver:
-- delivered (a 2xx), or given up after the retry window, with the attempts
-- spent and the last answer. A redelivered message of an event already
-- delivered or given up is not sent again. The given-up rows are what the
-- console's overview and actledger_notifications_failed_total read, in
-- every process alike.
CREATE TABLE notification_deliveries (
    notification_id uuid NOT NULL REFERENCES notifications (id),
    receiver        text NOT NULL,
    attempts        integer NOT NULL,
    last_status     integer,
    last_error      text,
    delivered_at    timestamptz,
    given_up_at     timestamptz,
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (notification_id, receiver),
    CHECK (delivered_at IS NULL OR given_up_at IS NULL)
);

CREATE INDEX notification_deliveries_given_up_idx ON notification_deliveries (receiver, given_up_at)
    WHERE given_up_at IS NOT NULL;
