-- Timestamps are INTEGER unix microseconds in columns declared TIMESTAMP,
-- which the driver reads back as time.Time (_time_integer_format=unix_micro).
-- Sagas: the working state the engine locks; the journal is the evidence.
CREATE TABLE sagas (
    id         TEXT PRIMARY KEY,
    status     TEXT NOT NULL,
    initiator  TEXT NOT NULL,
    ended      INTEGER NOT NULL DEFAULT 0,
    reason     TEXT NOT NULL DEFAULT '',
    head_seq   INTEGER NOT NULL DEFAULT 0,
    head_hash  TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX sagas_created ON sagas (created_at DESC, id DESC);
CREATE INDEX sagas_status_created ON sagas (status, created_at DESC, id DESC);

-- The hash-chained journal, one chain a saga (SPEC §3).
CREATE TABLE journal (
    saga_id   TEXT NOT NULL REFERENCES sagas (id),
    seq       INTEGER NOT NULL CHECK (seq > 0),
    tool_name TEXT NOT NULL,
    phase     TEXT NOT NULL,
    input     TEXT NOT NULL DEFAULT '',
    payload   TEXT NOT NULL DEFAULT '',
    timestamp TIMESTAMP NOT NULL,
    hash      TEXT NOT NULL,
    PRIMARY KEY (saga_id, seq)
);
CREATE INDEX journal_phase ON journal (saga_id, phase);

-- Gated calls waiting for a decision.
CREATE TABLE approval_requests (
    saga_id     TEXT NOT NULL REFERENCES sagas (id),
    journal_seq INTEGER NOT NULL,
    tool_name   TEXT NOT NULL,
    input       TEXT NOT NULL DEFAULT '',
    input_hash  TEXT NOT NULL,
    created_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (saga_id, journal_seq)
);
CREATE INDEX approval_requests_created ON approval_requests (created_at, saga_id, journal_seq);

-- One row a tool execution, from its INTENT to its outcome and undo.
CREATE TABLE calls (
    saga_id     TEXT NOT NULL REFERENCES sagas (id),
    seq         INTEGER NOT NULL,
    tool_name   TEXT NOT NULL,
    input       TEXT NOT NULL DEFAULT '',
    state       TEXT NOT NULL,
    outcome_seq INTEGER NOT NULL DEFAULT 0,
    result      TEXT NOT NULL DEFAULT '',
    started_at  TIMESTAMP NOT NULL,
    updated_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (saga_id, seq)
);
CREATE INDEX calls_unsettled ON calls (updated_at) WHERE state IN ('RUNNING', 'COMPENSATING');
