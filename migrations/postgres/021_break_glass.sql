-- Break-glass executions, for the banner every console page shows and the
-- metrics: one row per request a person of the policy's breakGlass had
-- executed without its quorum, until its rule's quorum ratified it
-- (ratified_at). A break-glass decision writes its row, the ratification
-- completing the quorum sets ratified_at, in the transactions that
-- journal them. An index of the journal, never evidence: verification
-- reads the break-glass and ratification entries themselves.
CREATE TABLE break_glass (
    saga_id     TEXT NOT NULL,
    journal_seq BIGINT NOT NULL,
    tool_name   TEXT NOT NULL,
    broken_by   TEXT NOT NULL,
    reason      TEXT NOT NULL,
    used_at     TIMESTAMPTZ NOT NULL,
    ratify_by   TIMESTAMPTZ NOT NULL,
    ratified_at TIMESTAMPTZ,
    PRIMARY KEY (saga_id, journal_seq)
);
CREATE INDEX break_glass_unratified ON break_glass (used_at, saga_id, journal_seq) WHERE ratified_at IS NULL;
