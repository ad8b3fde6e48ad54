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
ALTER TABLE approval_requests ADD COLUMN due_at TIMESTAMP;
CREATE INDEX approval_requests_due ON approval_requests (due_at) WHERE due_at IS NOT NULL;

-- Pending requests made before: their rule and policy lines, and the one
-- approval a request could have then (approver=<id> on its first line).
-- A line "<key>=<value>" is found after a line break of the payload with
-- line breaks put around it.
UPDATE approval_requests SET
    rule = COALESCE((SELECT CASE WHEN instr(char(10) || j.payload || char(10), char(10) || 'rule=') > 0 THEN
        substr(substr(char(10) || j.payload || char(10), instr(char(10) || j.payload || char(10), char(10) || 'rule=') + 6), 1,
            instr(substr(char(10) || j.payload || char(10), instr(char(10) || j.payload || char(10), char(10) || 'rule=') + 6), char(10)) - 1)
        END FROM journal j WHERE j.saga_id = approval_requests.saga_id AND j.seq = approval_requests.journal_seq), ''),
    policy = COALESCE((SELECT CASE WHEN instr(char(10) || j.payload || char(10), char(10) || 'policy=') > 0 THEN
        substr(substr(char(10) || j.payload || char(10), instr(char(10) || j.payload || char(10), char(10) || 'policy=') + 8), 1,
            instr(substr(char(10) || j.payload || char(10), instr(char(10) || j.payload || char(10), char(10) || 'policy=') + 8), char(10)) - 1)
        END FROM journal j WHERE j.saga_id = approval_requests.saga_id AND j.seq = approval_requests.journal_seq), '');
UPDATE approval_requests SET votes = 1,
    voters = (SELECT char(10) || substr(a.payload, 10, instr(a.payload || char(10), char(10)) - 10) || char(10)
        FROM journal a WHERE a.saga_id = approval_requests.saga_id AND a.tool_name = 'approval-gate' AND a.phase = 'APPROVED'
            AND a.input = 'seq=' || approval_requests.journal_seq)
WHERE EXISTS (SELECT 1 FROM journal a WHERE a.saga_id = approval_requests.saga_id AND a.tool_name = 'approval-gate'
    AND a.phase = 'APPROVED' AND a.input = 'seq=' || approval_requests.journal_seq);
