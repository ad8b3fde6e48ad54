-- Notifications: each event is written here in the same transaction as
-- the journal entry that causes it (its key names it once), with a
-- delivery to each endpoint that is to hear of it. Deliveries of one
-- thread (a request's, a call's) go to an endpoint in order; a relay on
-- each replica claims the due ones with a lease, sends them at least
-- once, and records every attempt.
CREATE TABLE outbox_events (
    id          TEXT PRIMARY KEY,
    key         TEXT NOT NULL UNIQUE,
    type        TEXT NOT NULL,
    saga_id     TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    thread      TEXT NOT NULL,
    receipt_seq BIGINT NOT NULL DEFAULT 0,
    body        TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX outbox_events_request ON outbox_events (saga_id, seq);

CREATE TABLE outbox_deliveries (
    id          BIGSERIAL PRIMARY KEY,
    event_id    TEXT NOT NULL REFERENCES outbox_events (id),
    endpoint    TEXT NOT NULL,
    thread      TEXT NOT NULL,
    state       TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    next_at     TIMESTAMPTZ NOT NULL,
    leased_by   TEXT,
    lease_until TIMESTAMPTZ,
    last_at     TIMESTAMPTZ,
    last_status INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL,
    UNIQUE (event_id, endpoint)
);
CREATE INDEX outbox_deliveries_due ON outbox_deliveries (next_at, id) WHERE state = 'pending';
CREATE INDEX outbox_deliveries_thread ON outbox_deliveries (endpoint, thread, id) WHERE state = 'pending';
CREATE INDEX outbox_deliveries_open ON outbox_deliveries (endpoint) WHERE state <> 'delivered';
CREATE INDEX outbox_deliveries_event ON outbox_deliveries (event_id);

-- Every attempt of a delivery: when, what the endpoint answered.
CREATE TABLE outbox_attempts (
    delivery_id BIGINT NOT NULL REFERENCES outbox_deliveries (id),
    n           INTEGER NOT NULL,
    at          TIMESTAMPTZ NOT NULL,
    status      INTEGER NOT NULL,
    error       TEXT NOT NULL,
    PRIMARY KEY (delivery_id, n)
);

-- The endpoints told of each thread, and what each answered its first
-- message with (a Slack message's channel and ts, an email's Message-ID):
-- NULL until one was delivered.
CREATE TABLE outbox_threads (
    endpoint TEXT NOT NULL,
    thread   TEXT NOT NULL,
    handle   TEXT,
    PRIMARY KEY (thread, endpoint)
);

-- Endpoints an operator, or a 410, stopped.
CREATE TABLE outbox_endpoints (
    name        TEXT PRIMARY KEY,
    disabled_at TIMESTAMPTZ NOT NULL,
    reason      TEXT NOT NULL
);

-- Escalation: how many of its rule's steps a pending request took, and
-- when the next is due.
ALTER TABLE approval_requests ADD COLUMN escalated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE approval_requests ADD COLUMN escalate_at TIMESTAMPTZ;
CREATE INDEX approval_requests_escalate ON approval_requests (escalate_at) WHERE escalate_at IS NOT NULL;
