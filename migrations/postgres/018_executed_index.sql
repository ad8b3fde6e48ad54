-- The review pages look entries up by tool and time only to find a tool's
-- last EXECUTED call: an index of those entries alone spares every other
-- entry (an INTENT, an AWAITING_APPROVAL, a vote) its insert into it, and
-- the sequencer's rewrite of it.
DROP INDEX IF EXISTS journal_tool;
CREATE INDEX journal_executed ON journal (tool_name, timestamp) WHERE phase = 'EXECUTED';
