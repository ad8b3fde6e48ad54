-- A sign-in started to vote on a request whose rule asks for a recent one
-- (step-up) sends the provider that max_age, in seconds, and the callback
-- holds the provider's auth_time to it; 0 is the session's own.
ALTER TABLE logins ADD COLUMN max_age BIGINT NOT NULL DEFAULT 0;
