-- Who made each gated call, beside the journal entry that records it.
ALTER TABLE approval_requests ADD COLUMN requester TEXT NOT NULL DEFAULT '';
