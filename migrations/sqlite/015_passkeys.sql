-- Passkeys people enrolled to vote with: the journal of the server's own
-- saga sagacity:passkeys is the evidence (each enrolment and removal,
-- signed); this table indexes it, and keeps each credential's newest
-- signature counter, which must never go back.
CREATE TABLE passkeys (
    id           TEXT PRIMARY KEY,
    identity     TEXT NOT NULL,
    issuer       TEXT NOT NULL DEFAULT '',
    subject      TEXT NOT NULL DEFAULT '',
    public_key   TEXT NOT NULL,
    rp_id        TEXT NOT NULL,
    origin       TEXT NOT NULL,
    sign_count   BIGINT NOT NULL DEFAULT 0,
    enrolled_at  TIMESTAMP NOT NULL,
    enrolled_seq BIGINT NOT NULL,
    removed_at   TIMESTAMP
);
CREATE INDEX passkeys_identity ON passkeys (identity, enrolled_seq);

-- WebAuthn ceremonies under way (a passkey being enrolled, a vote being
-- signed), each taken once: a replayed answer finds none.
CREATE TABLE ceremonies (
    id         TEXT PRIMARY KEY,
    identity   TEXT NOT NULL,
    kind       TEXT NOT NULL,
    data       TEXT NOT NULL,
    expires_at TIMESTAMP NOT NULL
);
CREATE INDEX ceremonies_expires ON ceremonies (expires_at);
