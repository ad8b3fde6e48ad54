-- Seals: every outbox row that says what is sent, or where, carries an
-- HMAC-SHA256 under a key derived from the server's signing key, which
-- the database never holds (internal/engine/seal.go); a delivery whose
-- rows do not open is refused, never sent. Rows written before this
-- migration have no seal: their deliveries not yet delivered are refused
-- here, and the threads' rows (who was told of each request, what each
-- endpoint answered its first message with) are dropped, so a request
-- in flight starts a new Slack message or mail thread, and an endpoint
-- an escalation step named hears of it no more.
ALTER TABLE outbox_events ADD COLUMN seal TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox_deliveries ADD COLUMN seal TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox_threads ADD COLUMN seal TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox_threads ADD COLUMN handle_seal TEXT NOT NULL DEFAULT '';
UPDATE outbox_deliveries SET state = 'refused', leased_by = NULL, lease_until = NULL,
    last_error = 'written before migration 019 sealed notifications with the server''s key: not sent'
    WHERE state IN ('pending', 'failed');
DELETE FROM outbox_threads;
