-- The people the server knows, for team health: each identity's roles and
-- groups as its newest sign-in gave them, and when that was. A sign-in
-- writes its row; the server reads them to say which approval rules the
-- people it knows can still meet. A record of who signed in, never
-- evidence: votes are checked against the journal, not against this.
CREATE TABLE members (
    identity  TEXT PRIMARY KEY,
    name      TEXT NOT NULL,
    auth      TEXT NOT NULL,
    roles     TEXT NOT NULL,
    member_of TEXT NOT NULL,
    seen_at   TIMESTAMP NOT NULL
);
CREATE INDEX members_seen ON members (seen_at);
