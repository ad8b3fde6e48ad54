-- Pending requests by tool, oldest first: the console's filter by tool, and
-- the metrics' count of each tool's requests with the oldest's time.
CREATE INDEX approval_requests_tool ON approval_requests (tool_name, created_at, saga_id, journal_seq);
