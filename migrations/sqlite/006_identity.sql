-- An OIDC identity's issuer and subject, and when the person last signed
-- in at the provider (unix seconds, 0 when it did not say): decision
-- receipts record them.
ALTER TABLE sessions ADD COLUMN issuer TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN subject TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN auth_time BIGINT NOT NULL DEFAULT 0;
