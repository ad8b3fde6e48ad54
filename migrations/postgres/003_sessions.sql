-- Console sign-in. Sessions are server-side: the cookie holds a random id,
-- the table only a keyed hash of it, so reading the table signs nobody in.
CREATE TABLE sessions (
    id_hash    TEXT PRIMARY KEY,
    principal  TEXT NOT NULL,
    name       TEXT NOT NULL,
    auth       TEXT NOT NULL,
    roles      TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    seen_at    TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX sessions_expires ON sessions (expires_at);

-- OIDC sign-ins in progress: state, nonce and PKCE verifier, bound to the
-- browser that started them by a cookie, usable once.
CREATE TABLE logins (
    id_hash    TEXT PRIMARY KEY,
    state      TEXT NOT NULL,
    nonce      TEXT NOT NULL,
    verifier   TEXT NOT NULL,
    return_to  TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
