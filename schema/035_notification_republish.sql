-- 035_notification_republish: notifications whose delivery stalled are
-- published again.
--
-- An event JetStream lost after the relay published it (or whose consumer
-- state was lost) was never delivered: the outbox row was gone, and
-- nothing else named the event. settled_at marks an event finished at
-- every receiver that takes it (its tenant's receivers subscribed to its
-- type and created before it): each has a delivered or given-up delivery.
-- The worker sets it after recording a final outcome, and the notification
-- worker's sweep (ledger/notification_sweep.go) sets it when it finds all
-- done (two workers finishing at once may each see the other unfinished).
-- The open events are what the sweep reads, from notifications_open_idx:
-- its cost grows with the events in flight, not with the history.
--
-- republished_at and republishes are the sweep's last re-publish and how
-- many it made: an event that stays stalled is published again only after
-- a backoff that doubles per re-publish.
--
-- A deployment without receivers writes no notification, so nothing here
-- is written on the path of an operation's change.
ALTER TABLE notifications
    ADD COLUMN settled_at     timestamptz,
    ADD COLUMN republished_at timestamptz,
    ADD COLUMN republishes    integer NOT NULL DEFAULT 0;

CREATE INDEX notifications_open_idx ON notifications (at) WHERE settled_at IS NULL;

-- The events already finished at every receiver are settled now; the
-- others stay open and the sweep settles or re-publishes them.
UPDATE notifications n SET settled_at = now()
WHERE NOT EXISTS (
    SELECT 1 FROM notification_receivers r
    WHERE r.tenant_id = n.tenant_id AND n.type = ANY (r.events) AND r.created_at <= n.at
      AND NOT EXISTS (SELECT 1 FROM notification_deliveries d
                      WHERE d.notification_id = n.id AND d.receiver = r.name
                        AND (d.delivered_at IS NOT NULL OR d.given_up_at IS NOT NULL)));
