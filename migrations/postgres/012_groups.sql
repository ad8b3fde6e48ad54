-- The groups a signed-in person belongs to, as the identity provider's
-- roles claim lists them (one per line): approval rules name them.
ALTER TABLE sessions ADD COLUMN member_of TEXT NOT NULL DEFAULT '';
