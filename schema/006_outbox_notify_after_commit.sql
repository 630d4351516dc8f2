-- 006_outbox_notify_after_commit: no NOTIFY inside data transactions.
--
-- Even notifying only when rows were added (005), every enqueue still took
-- Postgres's notify-queue lock until its commit was flushed, so enqueues
-- committed one behind another instead of sharing a flush. Writers now wake
-- relays after their commit, through outbox.Notifier, on a connection of its
-- own; relays still poll, so a lost wake-up only delays a message.
DROP TRIGGER outbox_notify ON outbox;
DROP FUNCTION outbox_notify();
