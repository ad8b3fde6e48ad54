-- What the newest verification of each saga found, and when: the audit
-- page lists these instead of verifying every saga it shows on every
-- load. The verification of every saga writes them, and so does each
-- single one. They are a record of work done, never evidence: the
-- journal, its receipts and the log are, and verifying again reads them.
CREATE TABLE verifications (
    saga_id     TEXT PRIMARY KEY,
    valid       INTEGER NOT NULL,
    entry_count INTEGER NOT NULL,
    break_at    INTEGER NOT NULL,
    message     TEXT NOT NULL,
    head_seq    INTEGER NOT NULL,
    checked_at  TIMESTAMP NOT NULL
);
