-- What the newest verification of each saga found, and when: the audit
-- page lists these instead of verifying every saga it shows on every
-- load. The verification of every saga writes them, and so does each
-- single one. They are a record of work done, never evidence: the
-- journal, its receipts and the log are, and verifying again reads them.
CREATE TABLE verifications (
    saga_id     TEXT PRIMARY KEY,
    valid       BOOLEAN NOT NULL,
    entry_count BIGINT NOT NULL,
    break_at    BIGINT NOT NULL,
    message     TEXT NOT NULL,
    head_seq    BIGINT NOT NULL,
    checked_at  TIMESTAMPTZ NOT NULL
);
