-- A supplier's webhook whose outcome expression says "ignore" (an event
-- type actledger does not act on) is stored like any other, so a
-- redelivery is still recognised by its event id, but it is marked applied
-- as it is inserted, with outcome 'ignored', and sends no evidence message:
-- it changes nothing.
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_status_check;
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_status_check
    CHECK (status IN ('succeeded', 'failed', 'ignored'));
