-- Approval policy: each pending request's row records the rule and policy
-- its AWAITING_APPROVAL entry pins, the reason its requester gave, the quorum that rule asks for, who
-- stands behind it now (one identity a line, between line breaks) and how
-- many, and when the server next acts on it by itself (expires it, or
-- closes its lapsed grant). The journal is the evidence; these columns
-- index it for the pending list ("waiting for me") and the expiry sweep,
-- and verification holds them to it.
ALTER TABLE approval_requests ADD COLUMN rule TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_requests ADD COLUMN policy TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_requests ADD COLUMN reason TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_requests ADD COLUMN quorum INTEGER NOT NULL DEFAULT 1;
ALTER TABLE approval_requests ADD COLUMN voters TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_requests ADD COLUMN votes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE approval_requests ADD COLUMN due_at TIMESTAMPTZ;
CREATE INDEX approval_requests_due ON approval_requests (due_at) WHERE due_at IS NOT NULL;

-- Pending requests made before: their rule and policy lines, and the one
-- approval a request could have then (approver=<id> on its first line).
UPDATE approval_requests r SET
    rule = COALESCE(substring(j.payload from E'(?:^|\\n)rule=([^\\n]*)'), ''),
    policy = COALESCE(substring(j.payload from E'(?:^|\\n)policy=([^\\n]*)'), '')
FROM journal j WHERE j.saga_id = r.saga_id AND j.seq = r.journal_seq;
UPDATE approval_requests r SET votes = 1, voters = E'\n' || substring(a.payload from E'^approver=([^\\n]*)') || E'\n'
FROM journal a WHERE a.saga_id = r.saga_id AND a.tool_name = 'approval-gate' AND a.phase = 'APPROVED'
    AND a.input = 'seq=' || r.journal_seq;
