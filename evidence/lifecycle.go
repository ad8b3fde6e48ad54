package evidence

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The journal alone says what became of each request: an AWAITING_APPROVAL
// entry opens one, and exactly one later entry closes it — the INTENT that
// resumes it, a person's REJECTED, a refused resume's REJECTED, the
// REJECTED that drops it when its saga fails, the server's REJECTED when
// it expired, or a reviewer's request for changes. Votes come in between:
// each approval is an APPROVED entry of its own, and a voter may withdraw
// theirs. The request rows are an index of what is open, never the truth:
// a row for a request the journal closed is a break, and nothing is
// decided or executed on it.

// Closing is how a request left the pending state.
type Closing string

// How requests close.
const (
	ClosedResumed  Closing = "resumed"  // an INTENT resumes=seq=<N> executed it
	ClosedRejected Closing = "rejected" // a person rejected it
	ClosedRefused  Closing = "refused"  // a resume of it was refused
	ClosedDropped  Closing = "dropped"  // its saga failed before it was executed
	// ClosedDismissed: a person dropped it, superseded, and the saga
	// went on.
	ClosedDismissed Closing = "dismissed"
	// ClosedChanges: a reviewer sent it back to the agent with what to
	// change; the saga went on.
	ClosedChanges Closing = "changes-requested"
	// ClosedExpired: no quorum was reached in time, and the server
	// rejected it.
	ClosedExpired Closing = "expired"
	// ClosedCancelled: its requester took it back (an MCP task
	// cancelled); the saga went on.
	ClosedCancelled Closing = "cancelled"
)

// Vote is an approval of a request, as the journal records it.
type Vote struct {
	Seq   int64 // its APPROVED entry
	Voter string
	// OnBehalfOf is the delegator a delegate's vote was cast for, who it
	// counts as; "" for a vote of the voter's own.
	OnBehalfOf string
	At         time.Time
	// Withdrawn is the entry that withdrew it; 0 while it stands.
	Withdrawn int64
	// Meets places an approval under a rule's thresholds: for each
	// alternative, the requirement it meets there (from 1), or 0 for
	// none; nil under a plain quorum.
	Meets []int
}

// Life is what the journal says became of one request.
type Life struct {
	Seq       int64 // its AWAITING_APPROVAL entry
	Tool      string
	Requester string
	// Votes are its approvals, in order, withdrawn ones too.
	Votes []Vote
	// SupersededBy is the saga's later request of the same tool that was
	// approved or executed while this one was open (it re-planned); 0
	// when none. A superseded request is neither approved nor executed.
	SupersededBy int64
	Closed       int64 // the entry that closed it; 0 while it is open
	Closing      Closing
	// BrokenAt is the break-glass decision that has it executed without
	// its quorum, 0 for none; BrokenBy is who made it.
	BrokenAt int64
	BrokenBy string
	// Ratifications are the approvals of its break-glass execution,
	// made after it, in order.
	Ratifications []Vote
}

// Standing are the votes not withdrawn, in order.
func (l *Life) Standing() []Vote {
	var out []Vote
	for _, v := range l.Votes {
		if v.Withdrawn == 0 {
			out = append(out, v)
		}
	}
	return out
}

// VoteOf returns voter's standing vote, if any.
func (l *Life) VoteOf(voter string) (Vote, bool) {
	for _, v := range l.Votes {
		if v.Voter == voter && v.Withdrawn == 0 {
			return v, true
		}
	}
	return Vote{}, false
}

// Counts is who v counts as: its delegator, or its voter.
func (v Vote) Counts() string {
	if v.OnBehalfOf != "" {
		return v.OnBehalfOf
	}
	return v.Voter
}

// Name says who cast v, for people: "bob for alice", or "bob".
func (v Vote) Name() string {
	if v.OnBehalfOf != "" {
		return v.Voter + " for " + v.OnBehalfOf
	}
	return v.Voter
}

// Clash returns the standing vote that an approval by voter, on behalf
// of behalf ("" for their own), would share a person with. Distinct
// people throughout: each person takes part in one standing vote on a
// request, as who cast it or as who it counts as; so a delegate casts
// one vote, for themselves or for one delegator, and a delegator and
// their delegate do not both vote.
func (l *Life) Clash(voter, behalf string) (Vote, bool) {
	counts := Vote{Voter: voter, OnBehalfOf: behalf}.Counts()
	for _, v := range l.Votes {
		if v.Withdrawn == 0 && (v.Voter == voter || v.Voter == counts || v.Counts() == voter || v.Counts() == counts) {
			return v, true
		}
	}
	return Vote{}, false
}

// voteAt is the approval, or the ratification, of entry seq.
func (l *Life) voteAt(seq int64) Vote {
	for _, v := range append(slices.Clone(l.Votes), l.Ratifications...) {
		if v.Seq == seq {
			return v
		}
	}
	return Vote{}
}

// Open reports whether the request is still pending, as the journal says.
func (l *Life) Open() bool { return l.Closed == 0 }

// How says how a closed request was closed: "rejected at seq=5".
func (l *Life) How() string { return fmt.Sprintf("%s at seq=%d", l.Closing, l.Closed) }

// Lifecycle is every request of one saga's journal, and what its journal
// says of the saga as a whole.
type Lifecycle struct {
	Requests map[int64]*Life // by the seq of their AWAITING_APPROVAL entry
	Order    []int64         // their seqs, ascending
	// Initiator is the requester of the journal's first entry: who
	// started the saga, as far as the journal knows.
	Initiator string
	// FailedAt is the entry after which the saga took no new call: a
	// tool failed, a request was rejected or a resume refused; 0 while
	// it has not failed.
	FailedAt int64
}

// Open lists the requests the journal says are pending, by seq.
func (lc Lifecycle) Open() []*Life {
	var out []*Life
	for _, seq := range lc.Order {
		if l := lc.Requests[seq]; l.Open() {
			out = append(out, l)
		}
	}
	return out
}

// CompensatedEffect opens the payload of the COMPENSATED entry of an undo
// that ran: "compensated effect seq=<the call's EXECUTED>".
const CompensatedEffect = "compensated effect "

// Ref is how an entry's input names the entry at seq, "seq=<N>": a
// decision's, a refusal's and a resolution's name the request or call.
func Ref(seq int64) string { return "seq=" + strconv.FormatInt(seq, 10) }

// refSeq reads an entry input Ref wrote; 0 when it is not one.
func refSeq(input string) int64 {
	n, err := strconv.ParseInt(strings.TrimPrefix(input, "seq="), 10, 64)
	if err != nil || !strings.HasPrefix(input, "seq=") || n < 1 {
		return 0
	}
	return n
}

// ReadLifecycle walks a journal (ordered by seq, its chain verified) and
// says what became of each request, checking the rules every journal the
// engine writes keeps: a decision or a resume names an open request, a
// person's vote on it stands once at a time and only a standing vote is
// withdrawn, a request is resumed only with a standing vote and never
// after it was superseded, nothing opens a call after the saga failed, nobody
// decides a request of a saga they started or a request they made, and
// time never runs backwards. The first entry that breaks one breaks the
// journal; the lifecycle up to it is returned either way. ReadLifecycle is
// pure.
func ReadLifecycle(entries []Entry) (Lifecycle, Verification) {
	lc := Lifecycle{Requests: map[int64]*Life{}}
	n := len(entries)
	bad := func(i int, format string, args ...any) (Lifecycle, Verification) {
		return lc, Broken(n, i, fmt.Sprintf("seq=%d (entry %d) ", entries[i].Seq, i)+fmt.Sprintf(format, args...))
	}
	for i, en := range entries {
		if i == 0 {
			lc.Initiator = en.Field(KeyRequester)
		} else if en.Timestamp.Before(entries[i-1].Timestamp) {
			return bad(i, "is dated before seq=%d: the journal's time runs backwards", entries[i-1].Seq)
		}
		opens := en.ToolName != GateTool && (en.Phase == PhaseAwaitingApproval || en.Phase == PhaseIntent)
		if opens && lc.FailedAt != 0 {
			return bad(i, "opens a call after the saga failed at seq=%d", lc.FailedAt)
		}
		if decider := en.Field(KeyResolvedBy); en.ToolName == GateTool && decider != "" {
			// A person's word on a call in doubt: four-eyes as for
			// decisions.
			if decider == lc.Initiator {
				return bad(i, "is a resolution by %s, who started the saga (four-eyes)", decider)
			}
			if c := refSeq(en.Input); c >= 1 && c < en.Seq && decider == entries[c-1].Field(KeyRequester) {
				return bad(i, "is a resolution by %s, who asked for the call at seq=%d (four-eyes)", decider, c)
			}
		}
		switch {
		case en.ToolName != GateTool && en.Phase == PhaseAwaitingApproval:
			lc.Requests[en.Seq] = &Life{Seq: en.Seq, Tool: en.ToolName, Requester: en.Field(KeyRequester)}
			lc.Order = append(lc.Order, en.Seq)

		case en.ToolName == GateTool && (en.Phase == PhaseApproved || en.Phase == PhaseRejected):
			l := lc.Requests[refSeq(en.Input)]
			decision, decider, _ := en.Decision()
			behalf := en.Field(KeyOnBehalfOf)
			switch {
			case l == nil:
				return bad(i, "decides %s, which is no request of this saga", en.Input)
			case decision == DecidedRatified:
				if why := l.ratifies(lc, decider); why != "" {
					return bad(i, "%s", why)
				}
				meets, err := ParseMeets(en.Field(KeyMeets))
				if err != nil {
					return bad(i, "ratifies the request at seq=%d %s", l.Seq, Message(err))
				}
				l.Ratifications = append(l.Ratifications, Vote{Seq: en.Seq, Voter: decider, At: en.Timestamp, Meets: meets})
				continue
			case !l.Open():
				return bad(i, "decides the request at seq=%d, %s", l.Seq, l.How())
			case l.BrokenAt != 0:
				return bad(i, "decides the request at seq=%d, which %s had executed by break-glass at seq=%d", l.Seq, l.BrokenBy, l.BrokenAt)
			case decision == DecidedExpired:
				// The server's word: nobody's four eyes.
				l.Closed, l.Closing = en.Seq, ClosedExpired
				lc.fail(en.Seq)
				continue
			case decision == DecidedCancelled:
				// The requester's own word, and theirs alone.
				if decider != l.Requester {
					return bad(i, "cancels the request at seq=%d as %s, who did not make it (%s did)", l.Seq, decider, l.Requester)
				}
				l.Closed, l.Closing = en.Seq, ClosedCancelled
				continue
			case decider == lc.Initiator:
				return bad(i, "is a decision by %s, who started the saga (four-eyes)", decider)
			case decider == l.Requester:
				return bad(i, "is a decision by %s, who made the request at seq=%d (four-eyes)", decider, l.Seq)
			case behalf != "" && (behalf == lc.Initiator || behalf == l.Requester):
				return bad(i, "is a decision on behalf of %s, who started the saga or made the request at seq=%d (four-eyes)", behalf, l.Seq)
			}
			switch decision {
			case DecidedBreakGlass:
				if l.SupersededBy != 0 {
					return bad(i, "breaks the glass on the request at seq=%d, superseded by the request at seq=%d", l.Seq, l.SupersededBy)
				}
				l.BrokenAt, l.BrokenBy = en.Seq, decider
			case DecidedDismissed:
				if l.SupersededBy == 0 {
					return bad(i, "dismisses the request at seq=%d, which nothing superseded", l.Seq)
				}
				l.Closed, l.Closing = en.Seq, ClosedDismissed
			case DecidedChanges:
				l.Closed, l.Closing = en.Seq, ClosedChanges
			case DecidedWithdrawn:
				v, ok := l.VoteOf(decider)
				if !ok {
					return bad(i, "withdraws %s's vote on the request at seq=%d, which has none standing", decider, l.Seq)
				}
				for k := range l.Votes {
					if l.Votes[k].Seq == v.Seq {
						l.Votes[k].Withdrawn = en.Seq
					}
				}
			case DecidedRejected:
				l.Closed, l.Closing = en.Seq, ClosedRejected
				lc.fail(en.Seq)
			default: // approved
				mine := Vote{Voter: decider, OnBehalfOf: behalf}
				if v, ok := l.Clash(decider, behalf); ok && v.Name() == mine.Name() {
					return bad(i, "is %s's second approval of the request at seq=%d (the first at seq=%d stands)", mine.Name(), l.Seq, v.Seq)
				} else if ok {
					return bad(i, "is %s's approval of the request at seq=%d, which shares a person with %s's at seq=%d (one person counts once)",
						mine.Name(), l.Seq, v.Name(), v.Seq)
				}
				if l.SupersededBy != 0 {
					return bad(i, "approves the request at seq=%d, superseded by the request at seq=%d", l.Seq, l.SupersededBy)
				}
				meets, err := ParseMeets(en.Field(KeyMeets))
				if err != nil {
					return bad(i, "approves the request at seq=%d %s", l.Seq, Message(err))
				}
				l.Votes = append(l.Votes, Vote{Seq: en.Seq, Voter: decider, OnBehalfOf: behalf, At: en.Timestamp, Meets: meets})
				lc.supersede(l)
			}

		case en.ToolName != GateTool && en.Phase == PhaseRejected:
			// A resume refused, or the request dropped when its saga failed.
			l := lc.Requests[refSeq(en.Input)]
			switch {
			case l == nil || l.Tool != en.ToolName:
				return bad(i, "refuses %s, which is no request of %s in this saga", en.Input, en.ToolName)
			case !l.Open():
				return bad(i, "refuses the request at seq=%d, %s", l.Seq, l.How())
			case ParseLines(en.Payload)[0].Key == KeyDropped:
				l.Closed, l.Closing = en.Seq, ClosedDropped
			default:
				l.Closed, l.Closing = en.Seq, ClosedRefused
				lc.fail(en.Seq)
			}

		case en.Phase == PhaseIntent && en.Field(KeyResumes) != "":
			l := lc.Requests[refSeq(en.Field(KeyResumes))]
			switch {
			case l == nil || l.Tool != en.ToolName || entries[l.Seq-1].Input != en.Input:
				return bad(i, "resumes %s, which is no request of these bytes of %s in this saga", en.Field(KeyResumes), en.ToolName)
			case !l.Open():
				return bad(i, "executes the request at seq=%d again: it was %s", l.Seq, l.How())
			case len(l.Standing()) == 0 && l.BrokenAt == 0:
				return bad(i, "executes the request at seq=%d, which nobody approved", l.Seq)
			case l.SupersededBy != 0:
				return bad(i, "executes the request at seq=%d, superseded by the request at seq=%d", l.Seq, l.SupersededBy)
			}
			l.Closed, l.Closing = en.Seq, ClosedResumed
			lc.supersede(l)

		case en.Phase == PhaseFailed:
			// A tool failed, or a person found a call in doubt had not
			// happened: the saga compensates.
			lc.fail(en.Seq)

		}
	}
	return lc, Verification{Valid: true, EntryCount: n, BreakAtIndex: -1, Message: fmt.Sprintf("all %d entries verified", n)}
}

// ratifies says why decider's ratification of request l breaks the
// journal, or "": only a request a break-glass executed is ratified, by
// distinct people, none of whom started the saga, made the request or
// broke the glass on it.
func (l *Life) ratifies(lc Lifecycle, decider string) string {
	switch {
	case l.BrokenAt == 0 || l.Closing != ClosedResumed:
		return fmt.Sprintf("ratifies the request at seq=%d, which no break-glass executed", l.Seq)
	case decider == lc.Initiator:
		return fmt.Sprintf("is a ratification by %s, who started the saga (four-eyes)", decider)
	case decider == l.Requester:
		return fmt.Sprintf("is a ratification by %s, who made the request at seq=%d (four-eyes)", decider, l.Seq)
	case decider == l.BrokenBy:
		return fmt.Sprintf("is a ratification by %s, who broke the glass on the request at seq=%d", decider, l.Seq)
	}
	for _, v := range l.Ratifications {
		if v.Voter == decider {
			return fmt.Sprintf("is %s's second ratification of the request at seq=%d (the first at seq=%d)", decider, l.Seq, v.Seq)
		}
	}
	return ""
}

// fail records that the saga failed at seq, unless it had already.
func (lc *Lifecycle) fail(seq int64) {
	if lc.FailedAt == 0 {
		lc.FailedAt = seq
	}
}

// supersede marks the saga's earlier open requests of l's tool as
// superseded by l, which was just approved or executed.
func (lc *Lifecycle) supersede(l *Life) {
	for _, seq := range lc.Order {
		if k := lc.Requests[seq]; seq < l.Seq && k.Tool == l.Tool && k.Open() && k.SupersededBy == 0 {
			k.SupersededBy = l.Seq
		}
	}
}

// Pairs says which call each entry that ends or undoes one belongs to, as
// the journal alone says it: by the seq of an EXECUTED or FAILED entry (a
// tool's answer, or a person's word on a call in doubt) and of a
// COMPENSATED or COMPENSATION_FAILED one, the seq of the call's INTENT.
// A tool's answer belongs to the oldest call of its tool and bytes still
// without one, the entry of an undo that ran to the call whose EXECUTED
// it names, a failed undo to the newest executed call of its tool and
// bytes not yet undone (the engine undoes one step at a time, newest
// first), and a person's entry to the call its input names. Entries
// (ordered by seq) need not verify. Pairs is pure.
func Pairs(entries []Entry) map[int64]int64 {
	out := map[int64]int64{}
	var open, executed []int64   // INTENTs without an answer, and executed ones not undone, oldest first
	outcome := map[int64]int64{} // an EXECUTED entry's seq → its INTENT's
	at := func(seq int64) *Entry {
		if seq < 1 || seq > int64(len(entries)) || entries[seq-1].Seq != seq {
			return nil
		}
		return &entries[seq-1]
	}
	for _, en := range entries {
		same := func(seq int64) bool {
			c := at(seq)
			return c != nil && c.ToolName == en.ToolName && c.Input == en.Input
		}
		var call int64
		switch {
		case en.Phase == PhaseIntent && en.ToolName != GateTool:
			open = append(open, en.Seq)
			continue
		case en.Phase != PhaseExecuted && en.Phase != PhaseFailed && en.Phase != PhaseCompensated && en.Phase != PhaseCompensationFailed:
			continue
		case en.ToolName == GateTool:
			if c := at(en.Refers()); c != nil && c.Phase == PhaseIntent && c.ToolName != GateTool && c.Seq < en.Seq {
				call = c.Seq
			}
		case en.Phase == PhaseExecuted || en.Phase == PhaseFailed:
			if i := slices.IndexFunc(open, same); i >= 0 {
				call = open[i]
			}
		case en.Phase == PhaseCompensated:
			if rest, ok := strings.CutPrefix(en.Payload, CompensatedEffect); ok {
				call = outcome[refSeq(rest)]
			}
		default: // the undo failed
			for i := len(executed) - 1; i >= 0 && call == 0; i-- {
				if same(executed[i]) {
					call = executed[i]
				}
			}
		}
		if call == 0 {
			continue
		}
		out[en.Seq] = call
		drop := func(list []int64) []int64 { return slices.DeleteFunc(list, func(s int64) bool { return s == call }) }
		switch en.Phase {
		case PhaseExecuted:
			open, executed, outcome[en.Seq] = drop(open), append(drop(executed), call), call
		case PhaseFailed:
			open = drop(open)
		default:
			executed = drop(executed)
		}
	}
	return out
}
