package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/wire"
)

// replay answers a call made again under key with what the first one
// under it came to: its outcome as the journal and the calls table hold
// it now (see outcome), or, for a gated call, what became of its request
// since (see fate). NotFound when no call of the saga has the key.
func (e *Engine) replay(ctx context.Context, p Principal, sagaID, toolName, input, key string) (CallResult, error) {
	seq, err := e.store.CallKey(ctx, sagaID, key)
	if err != nil {
		return CallResult{}, err
	}
	snap, err := e.readable(ctx, p, sagaID)
	if err != nil {
		return CallResult{}, err
	}
	if snap.Saga == nil || seq < 1 || seq > int64(len(snap.Entries)) {
		return CallResult{}, &Error{Kind: Internal, Msg: fmt.Sprintf("the call under key %q is not in the journal", key)}
	}
	first := snap.Entries[seq-1]
	if first.ToolName != toolName || first.Input != input {
		return CallResult{}, &Error{Kind: Unprocessable, Code: wire.CodeKeyReused, SagaID: sagaID, Seq: seq, Msg: fmt.Sprintf(
			"Idempotency-Key %q was used for the call at seq=%d (%s, input sha256 %s), with other bytes: "+
				"a new call needs a new key", key, seq, first.ToolName, PayloadHash(first.Input))}
	}
	what := fmt.Sprintf("the call under Idempotency-Key %q (seq=%d)", key, seq)
	if first.Phase == PhaseAwaitingApproval {
		return e.fate(ctx, snap, seq, what)
	}
	return e.outcome(ctx, snap, seq, seq, what)
}

// Gated says what the call gated at seq of saga sagaID answers now, as
// the call sent again under its key would (see fate): still awaiting
// approval (its message saying so once approved, and how to resume
// it), what its execution came to, or how it was closed. It is what a
// held call answers once its wait ends. Errors: NotFound when the saga
// has no request at seq; Forbidden as Can says for ActRead; those of
// fate.
func (e *Engine) Gated(ctx context.Context, p Principal, sagaID string, seq int64) (CallResult, error) {
	if err := e.guard(p, ActRead, sagaID); err != nil {
		return CallResult{}, err
	}
	snap, err := e.readable(ctx, p, sagaID)
	if err != nil {
		return CallResult{}, err
	}
	if snap.Saga == nil || seq < 1 || seq > int64(len(snap.Entries)) || snap.Entries[seq-1].Phase != PhaseAwaitingApproval {
		return CallResult{}, &Error{Kind: NotFound, Msg: fmt.Sprintf("saga %s has no request at seq=%d", sagaID, seq), SagaID: sagaID, Seq: seq}
	}
	return e.fate(ctx, snap, seq, fmt.Sprintf("the call at seq=%d", seq))
}

// ApprovedMessage is what an agent is told of its request of tool at seq
// of saga sagaID once approved under a rule it resumes itself, votes t:
// under a wait timer, from when.
func ApprovedMessage(tool, sagaID string, seq int64, t Tally) string {
	when := ""
	if !t.RunsFrom.IsZero() {
		when = " from " + evidence.Moment(t.RunsFrom) + " (its rule's wait after the quorum)"
	}
	return fmt.Sprintf("[APPROVED] Tool '%s' was approved by %s: execute it%s with the same bytes, POST /sagacity/resume/%s/%d "+
		"(or sagacity_resume over MCP).", tool, strings.Join(t.Voters(), ", "), when, sagaID, seq)
}

// fate says what became of the request at seq, made by a gated call
// (what, in messages), as the journal in snap says: still waiting for
// approval; refused at the gate, or when a resume of it was refused; sent
// back, expired or its grant ended (as closedIn says); rejected, dropped
// or dismissed (Conflict, saying so); or, once resumed, what its
// execution came to (see outcome).
func (e *Engine) fate(ctx context.Context, snap Snapshot, seq int64, what string) (CallResult, error) {
	gated := snap.Entries[seq-1]
	res := CallResult{SagaID: snap.Saga.ID, Seq: seq, ToolName: gated.ToolName, Status: snap.Saga.Status, InputHash: PayloadHash(gated.Input)}
	l, err := closedIn(snap.Entries, snap.Saga.ID, seq)
	switch {
	case l == nil || l.Open() || l.Closed > int64(len(snap.Entries)):
		res.Outcome, res.Message = OutcomeAwaitingApproval, AwaitingMessage(gated.ToolName)
		if l == nil {
			return res, nil
		}
		if r, err := e.ruleOf(ctx, gated); err == nil && !r.OnApproval {
			if t := tally(gated, l.Life, r); t.Met() {
				res.Message = ApprovedMessage(gated.ToolName, snap.Saga.ID, seq, t)
			}
		}
		return res, nil
	case l.Closing == ClosedResumed:
		return e.outcome(ctx, snap, seq, l.Closed, what)
	case gated.Field(KeyPolicy) != "" && gated.Field(KeyRule) == "":
		// No rule applied: the gate refused it at once (verification
		// holds it to that).
		res.Outcome, res.Error = OutcomeRefused, gateRefused(gateRefusal(snap.Entries[l.Closed-1]), seq)
		return res, nil
	case !IsKind(err, NotFound):
		return CallResult{}, err // sent back, or its time ran out
	case l.Closing == ClosedRefused:
		detail, _, _ := snap.Entries[l.Closed-1].Refusal()
		res.Outcome, res.Error = OutcomeRefused, fmt.Sprintf("a resume of the request at seq=%d was refused at seq=%d (%s), "+
			"and the saga is compensated", seq, l.Closed, detail)
		return res, nil
	}
	how := l.how()
	if l.Closing == ClosedRejected {
		// Who rejected it and why: what the agent acts on.
		rej := snap.Entries[l.Closed-1]
		_, by, _ := rej.Decision()
		how += " by " + by
		if why := rej.Field(KeyReason); why != "" {
			how += " (" + why + ")"
		}
	}
	return CallResult{}, &Error{Kind: Conflict, SagaID: snap.Saga.ID, Seq: seq, Msg: fmt.Sprintf("%s was gated, and its request was %s: "+
		"it was not executed", what, how)}
}

// outcome says what the call whose INTENT is at intent came to, as the
// journal and the calls table in snap hold it, for an answer about the
// entry at seq (the call's first: its INTENT, or the request it
// executed), naming the call as what: executed with its result (perhaps
// undone since, with its saga), failed with its error, or in doubt
// (IN_DOUBT, saying how a person resolves it); Conflict (code
// IN_PROGRESS) while it still runs on a live process.
func (e *Engine) outcome(ctx context.Context, snap Snapshot, seq, intent int64, what string) (CallResult, error) {
	sagaID := snap.Saga.ID
	res := CallResult{SagaID: sagaID, Seq: seq, ToolName: snap.Entries[intent-1].ToolName, Status: snap.Saga.Status}
	var c Call
	for _, k := range snap.Calls {
		if k.Seq == intent {
			c = k
		}
	}
	switch {
	case c.State == CallFailed && c.OutcomeSeq > 0 && c.OutcomeSeq <= int64(len(snap.Entries)):
		res.Outcome, res.Error = OutcomeFailed, snap.Entries[c.OutcomeSeq-1].Payload
	case c.State == CallRunning:
		doubt, err := e.inDoubt(sagaID, e.window(), e.stored(ctx))
		if err != nil {
			return CallResult{}, err
		}
		if !slices.ContainsFunc(doubt, func(d Call) bool { return d.Seq == intent }) {
			return CallResult{}, &Error{Kind: Conflict, Code: wire.CodeInProgress, SagaID: sagaID, Seq: seq, Msg: fmt.Sprintf(
				"%s is still running: ask again for its outcome", what)}
		}
		res.Outcome = OutcomeInDoubt
		res.Error = fmt.Sprintf("%s ran, or may have, and its outcome is not journaled: it is in doubt until a person resolves it "+
			"(%s); do not call it again", what, resolving(sagaID, intent))
	case c.State == "":
		return CallResult{}, &Error{Kind: Internal, Msg: fmt.Sprintf("%s has no record", what)}
	default:
		// It executed (then perhaps was undone with its saga).
		res.Outcome, res.Result = OutcomeExecuted, c.Result
	}
	return res, nil
}

// resolving says where a person resolves the call in doubt at seq of
// saga sagaID.
func resolving(sagaID string, seq int64) string {
	return fmt.Sprintf("the console's in-doubt page, or POST /sagacity/in-doubt/%s/%d/resolve", sagaID, seq)
}
