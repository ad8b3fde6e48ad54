-- The idempotency keys agents send with their calls, per saga, for the
-- saga's life: a call repeated with its key returns the first one's
-- outcome. The key is journaled too, on the call's first entry.
CREATE TABLE call_keys (
    saga_id TEXT NOT NULL,
    key     TEXT NOT NULL,
    seq     BIGINT NOT NULL,
    PRIMARY KEY (saga_id, key)
);

-- The server processes that run calls, and when each was last seen: a
-- call whose runner is gone is in doubt at once. A process starting
-- retires the ones of its replica before it.
CREATE TABLE runners (
    id         TEXT PRIMARY KEY,
    replica    TEXT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    seen_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX runners_replica ON runners (replica);

-- Which runner ran each call, and for a resumed call the request it
-- executes (its idempotency key names the request).
ALTER TABLE calls ADD COLUMN runner TEXT NOT NULL DEFAULT '';
ALTER TABLE calls ADD COLUMN request_seq BIGINT NOT NULL DEFAULT 0;

-- How many of a saga's calls run or are being undone: while one is in
-- doubt the saga takes no new call, and a saga with none needs no look.
ALTER TABLE sagas ADD COLUMN running BIGINT NOT NULL DEFAULT 0;
UPDATE sagas SET running = (SELECT count(*) FROM calls
    WHERE calls.saga_id = sagas.id AND calls.state IN ('RUNNING', 'COMPENSATING'));
