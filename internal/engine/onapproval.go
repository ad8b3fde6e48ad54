package engine

import (
	"context"
)

// Execution on approval: a rule that says execute: on-approval has the
// server execute an approved request's bytes itself, for its requester,
// as soon as the quorum stands: the vote that completes the quorum
// executes it once committed (approve), and the Recoverer executes what
// a process stopped before doing so (ExecuteApproved). Under a wait
// timer (notBefore) the vote executes nothing: the request's row is due
// when the wait ends, and the Lapser executes it then (Lapse). Each is a resume
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
// before executing it; and those a break-glass decision left so. It returns how many it executed (whatever the
// tool's outcome). Errors: Unavailable when the store is; a request
// that cannot be executed now (halted, its grant ended, another process
// executing it) is left to the next pass or its sweep.
func (e *Engine) ExecuteApproved(ctx context.Context) (int, error) {
	approved := true
	reqs, err := e.store.Pending(ctx, PendingFilter{Approved: &approved, Limit: MaxList})
	if err != nil {
		return 0, err
	}
	n, now := 0, e.now()
	for _, q := range reqs {
		r, ok := e.onApproval(ctx, q.ApprovalRequest)
		if !ok || (r.NotBefore > 0 && q.Due.After(now)) {
			continue // a wait timer running: Lapse executes it when due
		}
		if _, err := e.executeApproved(ctx, q.SagaID, q.JournalSeq); err != nil {
			if IsKind(err, Unavailable) && e.Halted() == "" {
				return n, err
			}
			e.log.Warn("executing an approved request on approval failed; trying again later", "saga", q.SagaID, "seq", q.JournalSeq, "err", err)
			continue
		}
		e.enacted(ctx, q.SagaID)
		n++
	}
	broken, err := e.executeBroken(ctx)
	return n + broken, err
}

// onApproval returns the rule a pending request's row names, and whether
// it executes on approval. The row only chooses what to try: resume
// reads the rule from the journal.
func (e *Engine) onApproval(ctx context.Context, q ApprovalRequest) (Rule, bool) {
	if q.Policy == "" {
		return Rule{}, false
	}
	a, err := e.policyOf(ctx, q.Policy)
	if err != nil {
		return Rule{}, false
	}
	r, ok := a.Rule(q.ToolName, q.Rule)
	return r, ok && r.OnApproval
}
