-- One global Merkle log (RFC 6962) over every journal entry: an entry's
-- leaf is its index in the log, NULL until the sequencer appends it.
ALTER TABLE journal ADD COLUMN leaf BIGINT;
CREATE UNIQUE INDEX journal_leaf ON journal (leaf);
CREATE INDEX journal_unsequenced ON journal (timestamp, saga_id, seq) WHERE leaf IS NULL;

-- The tree's nodes (level 0: the leaves), hex SHA-256, for proofs.
CREATE TABLE log_nodes (
    level INTEGER NOT NULL,
    idx   BIGINT NOT NULL,
    hash  TEXT NOT NULL,
    PRIMARY KEY (level, idx)
);

-- The log's size and root, and the public key of the servers that sign
-- its checkpoints (recorded by the first; a server with another key halts
-- executions). The sequencer locks this one row.
CREATE TABLE log_state (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    size BIGINT NOT NULL,
    root TEXT NOT NULL,
    verifier_key TEXT NOT NULL
);
INSERT INTO log_state (id, size, root, verifier_key) VALUES (1, 0, 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', '');
