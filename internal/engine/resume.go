package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/wire"
)

// Why a resume is not run. RefusedStale and RefusedGrant are refusals,
// journaled (SPEC §4); RefusedNoApproval and RefusedQuorum begin the
// message of a resume asked before the quorum, which changes nothing
// (Conflict, code wire.CodeUndecided); RefusedWait that of one asked
// before the rule's wait timer ended (Conflict, code wire.CodeNotYet).
const (
	RefusedNoApproval = "no human approval recorded"
	RefusedStale      = "stale-approval: payload changed since approval was granted"
	// RefusedQuorum is a request approved by fewer people than its rule
	// asks for.
	RefusedQuorum = "quorum not reached"
	// RefusedGrant starts the refusal of a request whose approval's
	// grant ended before it was executed.
	RefusedGrant = "grant-expired: the approval's grant ended before execution"
	// RefusedWait is an approved request whose rule has it wait after
	// its quorum (notBefore), resumed before the wait ended.
	RefusedWait = "wait timer running"
)

// errResumed is what a resume finds of a request the journal says was
// resumed already, by the INTENT at seq: what that execution came to is
// read, and answered, once the transaction is over.
type errResumed struct{ intent int64 }

func (x *errResumed) Error() string {
	return fmt.Sprintf("the request was resumed at seq=%d", x.intent)
}

// ResumeResult reports a resume. A refused resume is a completed action,
// not an error: Refused is set, Reason says why, the tool was not called
// and the saga has been compensated.
type ResumeResult struct {
	SagaID  string
	Seq     int64 // the gated entry
	Status  Status
	Result  string // the tool's result when it executed
	Refused bool
	Reason  string // the refusal detail, or the tool's error when it failed
	Call    CallResult
}

// Resume executes an approved request, bound to the payload that was
// approved. It fails closed, in this order: no pending request → NotFound,
// nothing journaled (Conflict with code CHANGES_REQUESTED or EXPIRED when
// a reviewer sent it back, or the server closed it); a journal that does
// not verify, a request that does not match its AWAITING_APPROVAL entry,
// or one whose rule cannot be found → Conflict, nothing journaled; a
// request whose time ran out (its deadline passed without its quorum, or
// its grant ended) → closed as the sweep closes it, the saga compensated,
// and Conflict with code EXPIRED, as a resume after the sweep gets;
// fewer standing approvals than its rule's quorum → Conflict (code
// UNDECIDED, the message beginning RefusedNoApproval or RefusedQuorum),
// nothing run or changed, whatever the bytes: asking early is how an
// agent polls, and it costs no one their vote; approved, but before its
// rule's wait after the quorum ended (notBefore) → Conflict (code
// NOT_YET, the message beginning RefusedWait and saying when it may
// run), nothing run or changed, whatever the bytes; sha256(payload) ≠ the
// hash of the input that entry journaled (byte-exact, whatever the
// bytes) → refused: REJECTED is journaled (RefusedStale, with the
// attempted bytes, see EncodeText), the saga's pending requests are
// dropped and its executed steps compensated.
// Otherwise the request is claimed and dropped in the transaction that
// journals INTENT, so however many resumes race, across processes, the
// tool runs at most once. A resume of a request the journal says was
// executed already runs nothing and answers what that execution came to,
// as a call sent again under its key does: its outcome, IN_DOUBT, or
// Conflict (code IN_PROGRESS) while it runs; Conflict for other bytes
// than the ones it ran with.
//
// Other errors: NotFound when the request's tool is not registered;
// Forbidden as Can says; Invalid for a payload larger than the input limit.
func (e *Engine) Resume(ctx context.Context, p Principal, sagaID string, seq int64, payload string) (ResumeResult, error) {
	if len(payload) > e.maxInput {
		return ResumeResult{}, Errorf(Invalid, "payload is larger than %d bytes", e.maxInput)
	}
	return e.resume(ctx, p, sagaID, seq, &payload, nil, false)
}

// Execute is Resume with the bytes the request's verified AWAITING_APPROVAL
// entry holds: what a person who approved it, or the agent that asked,
// runs from the console or MCP without presenting the bytes again. Every
// check of Resume holds.
func (e *Engine) Execute(ctx context.Context, p Principal, sagaID string, seq int64) (ResumeResult, error) {
	return e.resume(ctx, p, sagaID, seq, nil, nil, false)
}

// resume does Resume with payload, or Execute when it is nil, keeping
// what verifying the journal found in kept (Decide) unless it is nil.
// server is the server's own execution of a request whose rule executes
// on approval (see executeApproved): p is then nobody, no one's access
// is asked, and the INTENT names the request's requester, executed by
// the server.
func (e *Engine) resume(ctx context.Context, p Principal, sagaID string, seq int64, payload *string, kept *verified, server bool) (rr ResumeResult, err error) {
	var tool Tool // the request's, once found
	defer func() { e.obs.Called(tool.Name, ended(rr.Call.Outcome, rr.Refused, err)) }()
	if err := e.guard(p, ActResume, sagaID); err != nil && !server {
		return ResumeResult{}, err
	}
	if why := e.Halted(); why != "" {
		// Nothing is journaled: the request stays pending until an
		// operator restores the log.
		return ResumeResult{}, &Error{Kind: Unavailable, Msg: "executions of IRREVERSIBLE tools are halted: " + why +
			"; the request stays pending until an operator restores the database or the checkpoints", Err: ErrHalted, SagaID: sagaID, Seq: seq}
	}
	var refusal string
	var call Call
	var closing Entry
	var ranOut bool
	st := starts{e: e}
	defer st.release()
	closed := func(tx Tx, sagaID string, seq int64) error {
		entries, err := tx.Entries(sagaID)
		if err != nil {
			return err
		}
		l, err := closedIn(entries, sagaID, seq)
		if l != nil && l.Closing == ClosedResumed {
			if c, ok, err := st.find(sagaID, tx.Call); err != nil || ok {
				// This resume's INTENT committed: it runs now.
				call, refusal, ranOut = c, "", false
				tool, _ = e.tool(c.ToolName)
				return err
			}
			return &errResumed{intent: l.Closed}
		}
		return err
	}
	s, err := st.again(ctx, sagaID, &call, func(ctx context.Context) (Saga, error) {
		return e.onPending(ctx, sagaID, seq, kept, closed, func(tx Tx, s *Saga, b bound) (err error) {
			refusal, call = "", Call{}
			gated := b.gated
			switch err := e.Can(p, ActResume, Subject{Saga: s}); {
			case server && !b.rule.OnApproval && b.life.BrokenAt == 0:
				return &Error{Kind: Conflict, Msg: fmt.Sprintf("rule %s of the request at seq=%d does not execute on approval: its requester resumes it", b.rule.Name, seq)}
			case err != nil && !server:
				return err
			}
			var ok bool
			if tool, ok = e.tool(gated.ToolName); !ok {
				return &Error{Kind: NotFound, Msg: fmt.Sprintf("tool %q is not registered", gated.ToolName)}
			}
			if b.life.SupersededBy != 0 {
				// Not a refusal: the saga goes on with the request that
				// replaced this one.
				return superseded(b.life)
			}
			now := e.stamp(s)
			if closing, ranOut, err = e.runOut(tx, s, b, now); ranOut || err != nil {
				return err
			}
			if b.drift != nil {
				return b.drift
			}
			if b.life.BrokenAt != 0 && !server {
				return &Error{Kind: Conflict, Msg: fmt.Sprintf("the request at seq=%d was executed by break-glass at seq=%d: the server executes it", seq, b.life.BrokenAt)}
			}
			if !b.tally.Met() && b.life.BrokenAt == 0 {
				// A resume runs what people approved; asked before they
				// did, whatever the bytes, it changes nothing.
				return undecided(b.tally, gated, payload)
			}
			if b.tally.Early(now) && b.life.BrokenAt == 0 {
				return notYet(b.tally, gated, payload, now)
			}
			if err := e.clear(tx, s); err != nil {
				return err
			}
			if payload != nil && PayloadHash(*payload) != PayloadHash(gated.Input) {
				refusal = RefusedStale
				detail := Lines{{Value: refusal}}.With(KeyAttempted, EncodeText(*payload))
				_, err := e.refused(tx, s, b, detail, fmt.Sprintf("resume of %s at seq=%d refused: %s", gated.ToolName, seq, refusal), now)
				return err
			}
			if _, err := tx.DeleteApprovals(sagaID, seq); err != nil {
				return err
			}
			lines, requester := requested(p, "").With(KeyResumes, gateRef(seq)), p.ID
			if server {
				requester = gated.Field(KeyRequester)
				lines = Lines{{KeyRequester, requester}}.With(KeyResumes, gateRef(seq)).With(KeyExecutedBy, ExecutedByServer)
			}
			en, err := e.appendAt(tx, s, gated.ToolName, PhaseIntent, gated.Input, lines.String(), now)
			if err != nil {
				return err
			}
			call = Call{SagaID: sagaID, Seq: en.Seq, ToolName: gated.ToolName, Input: gated.Input, Requester: requester,
				State: CallRunning, StartedAt: en.Timestamp, UpdatedAt: en.Timestamp, Request: seq, Runner: e.runnerID()}
			st.hold(call)
			if err := e.putCall(tx, s, "", call); err != nil {
				return err
			}
			return e.settle(tx, s)
		})
	})
	if again, ok := errors.AsType[*errResumed](err); ok {
		return e.resumed(ctx, p, sagaID, seq, again.intent, payload, server)
	}
	if err != nil {
		e.unknown(sagaID, err) // a refusal compensates
		return ResumeResult{}, at(err, sagaID, seq)
	}
	if ranOut {
		e.compensateNow(ctx, s)
		return ResumeResult{}, timedOut(sagaID, seq, closing)
	}
	if refusal != "" {
		return ResumeResult{SagaID: sagaID, Seq: seq, Status: e.compensateNow(ctx, s).Status, Refused: true, Reason: refusal}, nil
	}
	cr, err := e.execute(ctx, tool, call, s.Status)
	if err != nil {
		return ResumeResult{}, err
	}
	return ResumeResult{SagaID: sagaID, Seq: seq, Status: cr.Status, Result: cr.Result, Reason: cr.Error, Call: cr}, nil
}

// resumed answers p's resume, with payload (nil for Execute), of the
// request at seq of saga sagaID that the INTENT at intent executed
// already: nothing runs again, and the answer is what that execution came
// to (see outcome). Conflict when payload is other bytes than the ones it
// ran with; Forbidden as Can says.
func (e *Engine) resumed(ctx context.Context, p Principal, sagaID string, seq, intent int64, payload *string, server bool) (ResumeResult, error) {
	snap, err := e.store.Snapshot(ctx, sagaID, true)
	if err != nil {
		return ResumeResult{}, err
	}
	if snap.Saga == nil || intent > int64(len(snap.Entries)) {
		return ResumeResult{}, noPending(sagaID, seq) // the saga's rows went meanwhile
	}
	if err := e.Can(p, ActResume, Subject{Saga: snap.Saga}); err != nil && !server {
		return ResumeResult{}, err
	}
	if ran := snap.Entries[intent-1]; payload != nil && *payload != ran.Input {
		return ResumeResult{}, &Error{Kind: Conflict, SagaID: sagaID, Seq: seq, Msg: fmt.Sprintf("the request at seq=%d was executed "+
			"at seq=%d with the bytes approved (sha256 %s), not these: nothing was run", seq, intent, PayloadHash(ran.Input))}
	}
	cr, err := e.outcome(ctx, snap, seq, intent, fmt.Sprintf("the execution of the request at seq=%d (seq=%d)", seq, intent))
	if err != nil {
		return ResumeResult{}, err
	}
	return ResumeResult{SagaID: sagaID, Seq: seq, Status: cr.Status, Result: cr.Result, Reason: cr.Error, Call: cr}, nil
}

// refused journals the refusal detail of executing bound request b (its
// first line says why), tells of it, and fails the saga for reason. It
// returns the refusal's entry.
func (e *Engine) refused(tx Tx, s *Saga, b bound, detail Lines, reason string, at time.Time) (Entry, error) {
	en, err := e.appendAt(tx, s, b.gated.ToolName, PhaseRejected, gateRef(b.gated.Seq), detail.String(), at)
	if err != nil {
		return Entry{}, err
	}
	ev := requestEvent(wire.EventRefused, b.gated, b.rule, b.tally, en.Seq, en.Timestamp)
	ev = ev.said("a resume of %s was refused (%s); the saga is compensated", ev.what(), detail[0].Value)
	if strings.HasPrefix(detail[0].Value, RefusedGrant) {
		ev.Type, ev.Key = wire.EventExpired, fmt.Sprintf("%s/%d/%s", ev.SagaID, en.Seq, wire.EventExpired)
		ev = ev.said("%s was not executed within its grant; the saga is compensated", ev.what())
	}
	if err := e.tell(tx, ev); err != nil {
		return Entry{}, err
	}
	return en, e.fail(tx, s, reason)
}

// undecided is the answer to a resume or an execution of the request at
// seq of tool gated, whose votes stand as t, short of its quorum: nothing
// runs and nothing changes, whatever bytes were presented (payload, nil
// for Execute's). Its message begins as the seed's refusal did:
// RefusedNoApproval, or RefusedQuorum once someone approved.
func undecided(t Tally, gated Entry, payload *string) error {
	why := RefusedNoApproval
	if len(t.Votes) > 0 {
		why = RefusedQuorum
	}
	return &Error{Kind: Conflict, Code: wire.CodeUndecided, Msg: fmt.Sprintf("%s: the request at seq=%d is not decided yet (%s)%s: "+
		"nothing was run or changed; wait until it is approved, then resume it", why, gated.Seq, t.Progress(), otherBytes(gated, payload))}
}

// notYet is the answer to a resume or an execution, at now, of the
// approved request at seq of tool gated before its rule's wait after the
// quorum ended (t.Early): nothing runs and nothing changes, whatever
// bytes were presented. Its message begins RefusedWait and says when it
// may run, and how long that is from now.
func notYet(t Tally, gated Entry, payload *string, now time.Time) error {
	return &Error{Kind: Conflict, Code: wire.CodeNotYet, Msg: fmt.Sprintf("%s: the request at seq=%d is approved, and rule %s has it "+
		"wait %s after its quorum: it may run from %s, in %s%s: nothing was run or changed; resume it then", RefusedWait, gated.Seq,
		t.Rule.Name, t.Rule.NotBefore, evidence.Moment(t.RunsFrom), t.RunsFrom.Sub(now).Round(time.Second), otherBytes(gated, payload))}
}

// otherBytes is what an answer that runs nothing adds when payload (nil
// for Execute's) is not the bytes the request at gated asks for.
func otherBytes(gated Entry, payload *string) string {
	if payload != nil && *payload != gated.Input {
		return fmt.Sprintf("; and these are not the bytes it asks for (sha256 %s)", PayloadHash(gated.Input))
	}
	return ""
}
