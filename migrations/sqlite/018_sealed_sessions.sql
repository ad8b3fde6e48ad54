-- A session or sign-in row is sealed: a keyed MAC, under the session key
-- the database never sees, over every column that says who the person is
-- or where the sign-in goes. A row written or edited by SQL authenticates
-- nobody. Rows from before have no seal and are dropped: everyone signs
-- in again.
DELETE FROM sessions;
DELETE FROM logins;
ALTER TABLE sessions ADD COLUMN seal TEXT NOT NULL DEFAULT '';
-- The identity provider's own word on the sign-in (its signed ID token and
-- the key that verified it), which the first vote or passkey enrolment of
-- the session journals.
ALTER TABLE sessions ADD COLUMN sign_in TEXT NOT NULL DEFAULT '';
ALTER TABLE logins ADD COLUMN seal TEXT NOT NULL DEFAULT '';
-- A sign-in that asked the provider to authenticate the person again
-- (max_age=0), as enrolling a passkey takes.
ALTER TABLE logins ADD COLUMN reauth BIGINT NOT NULL DEFAULT 0;
