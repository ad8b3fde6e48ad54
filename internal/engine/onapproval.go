package engine

import (
	"context"
)

// Execution on approval: a rule that says execute: on-approval has the
// server execute an approved request's bytes itself, for its requester,
// as soon as the quorum stands: the vote that completes the quorum
// executes it once committed (approve), and the Recoverer executes what
// a process stopped before doing so (ExecuteApproved). Each is a resume
// like the requester's (resume, server), so however many race, across
// processes, the tool runs at most once; its INTENT names the requester
// and says the server executed it (KeyExecutedBy), which verification
// accepts only under a rule that executes on approval.

// executeApproved executes the approved request at seq of saga sagaID
// for its requester, its rule executing on approval; what a resume of it
// answers, for one already executed its outcome.
func (e *Engine) executeApproved(ctx context.Context, sagaID string, seq int64) (ResumeResult, error) {
	return e.resume(context.WithoutCancel(ctx), Principal{}, sagaID, seq, nil, nil, true)
}

// ExecuteApproved executes the approved requests whose rule executes on
// approval and that were not executed yet, oldest first, at most MaxList
// a pass: those whose quorum a vote completed in a process that stopped
// before executing it. It returns how many it executed (whatever the
// tool's outcome). Errors: Unavailable when the store is; a request
// that cannot be executed now (halted, its grant ended, another process
// executing it) is left to the next pass or its sweep.
func (e *Engine) ExecuteApproved(ctx context.Context) (int, error) {
	approved := true
	reqs, err := e.store.Pending(ctx, PendingFilter{Approved: &approved, Limit: MaxList})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, q := range reqs {
		if !e.onApproval(ctx, q.ApprovalRequest) {
			continue
		}
		if _, err := e.executeApproved(ctx, q.SagaID, q.JournalSeq); err != nil {
			if IsKind(err, Unavailable) && e.Halted() == "" {
				return n, err
			}
			e.log.Warn("executing an approved request on approval failed; trying again later", "saga", q.SagaID, "seq", q.JournalSeq, "err", err)
			continue
		}
		n++
	}
	return n, nil
}

// onApproval reports whether the rule a pending request's row names
// executes on approval. The row only chooses what to try: resume reads
// the rule from the journal.
func (e *Engine) onApproval(ctx context.Context, q ApprovalRequest) bool {
	if q.Policy == "" {
		return false
	}
	a, err := e.policyOf(ctx, q.Policy)
	if err != nil {
		return false
	}
	r, ok := a.Rule(q.ToolName, q.Rule)
	return ok && r.OnApproval
}
