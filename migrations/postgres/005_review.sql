-- The console's review pages: the last executed call of a tool, in any saga.
CREATE INDEX journal_tool ON journal (tool_name, phase, timestamp);

-- Who asked for each call, beside the INTENT entry that records it.
ALTER TABLE calls ADD COLUMN requester TEXT NOT NULL DEFAULT '';
