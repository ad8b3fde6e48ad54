package evidence

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// How the votes on a request stand under its rule, and whether a journal
// kept its rules: what the server asks before it counts a vote or runs a
// request, and what verification, on the server and offline, checks
// afterwards. Both are pure.

// Tally is where the votes on a request stand under its rule.
type Tally struct {
	Rule Rule
	// Votes are the standing approvals, oldest first.
	Votes []Vote
	// Requested is when the request was made; Deadline that plus the
	// rule's Expires (zero when it sets none).
	Requested, Deadline time.Time
	// Reached is when the Quorum-th standing vote was cast, zero while
	// the votes are short; GrantUntil is Reached plus the rule's Grant
	// (zero when it sets none or while short); RunsFrom is Reached plus
	// the rule's NotBefore, when the request may be executed from (zero
	// when it sets none or while short).
	Reached, GrantUntil, RunsFrom time.Time
}

// Count counts the standing votes of request l (nil: none yet), made by
// entry gated, under rule r.
func Count(gated Entry, l *Life, r Rule) Tally {
	t := Tally{Rule: r, Requested: gated.Timestamp}
	if l != nil {
		t.Votes = l.Standing()
	}
	if r.Expires > 0 {
		t.Deadline = gated.Timestamp.Add(r.Expires)
	}
	// The quorum was reached by the first votes that meet it.
	for k := 1; k <= len(t.Votes); k++ {
		if (Tally{Rule: r, Votes: t.Votes[:k]}).Met() {
			t.Reached = t.Votes[k-1].At
			if r.Grant > 0 {
				t.GrantUntil = t.Reached.Add(r.Grant)
			}
			if r.NotBefore > 0 {
				t.RunsFrom = t.Reached.Add(r.NotBefore)
			}
			break
		}
	}
	return t
}

// Met reports whether the quorum is reached: under thresholds, every
// requirement of one alternative is met.
func (t Tally) Met() bool {
	if t.Rule.Thresholds == nil {
		return len(t.Votes) >= max(t.Rule.Quorum, 1)
	}
	return t.needed() == 0
}

// Expired reports whether the request ran out of time at at: no quorum
// by its deadline.
func (t Tally) Expired(at time.Time) bool {
	return !t.Met() && !t.Deadline.IsZero() && at.After(t.Deadline)
}

// Lapsed reports whether its grant ran out at at: the quorum was
// reached, and it was not executed in time.
func (t Tally) Lapsed(at time.Time) bool {
	return t.Met() && !t.GrantUntil.IsZero() && at.After(t.GrantUntil)
}

// Early reports whether at is before the end of the request's wait
// timer: approved, and not to be executed yet.
func (t Tally) Early(at time.Time) bool {
	return t.Met() && !t.RunsFrom.IsZero() && at.Before(t.RunsFrom)
}

// Due is when the server next acts on the request by itself: the
// deadline while the votes are short; once they are not, the end of the
// wait under a rule that executes on approval (the server executes it
// then), otherwise the end of the grant; zero for never.
func (t Tally) Due() time.Time {
	switch {
	case !t.Met():
		return t.Deadline
	case t.Rule.OnApproval && !t.RunsFrom.IsZero():
		return t.RunsFrom
	}
	return t.GrantUntil
}

// Voters names who voted, in order ("bob for alice" for a delegate's
// vote).
func (t Tally) Voters() []string { return voters(t.Votes) }

// People are the identities that take part in the standing votes: who
// cast each, and who a delegate's counts as.
func (t Tally) People() []string {
	var out []string
	for _, v := range t.Votes {
		out = append(out, v.Voter)
		if v.OnBehalfOf != "" {
			out = append(out, v.OnBehalfOf)
		}
	}
	return out
}

// Progress says where the votes stand, for people: "1 of 2 approvals
// (alice); waiting for 1 more from finance-leads"; once approved under a
// wait timer, from when it may run ("…; approved; may run from
// 2026-01-02 15:04:05 UTC").
func (t Tally) Progress() string {
	s := t.votesProgress()
	if !t.RunsFrom.IsZero() {
		s += "; approved; may run from " + Moment(t.RunsFrom)
	}
	return s
}

// votesProgress is Progress without the wait.
func (t Tally) votesProgress() string {
	if t.Rule.Thresholds != nil {
		return t.progressOf()
	}
	q := max(t.Rule.Quorum, 1)
	s := fmt.Sprintf("%d of %d approval", len(t.Votes), q)
	if q > 1 {
		s += "s"
	}
	if len(t.Votes) > 0 {
		s += " (" + strings.Join(t.Voters(), ", ") + ")"
	}
	if n := q - len(t.Votes); n > 0 {
		s += fmt.Sprintf("; waiting for %d more from %s", n, strings.Join(t.Rule.Approvers, " or "))
	}
	return s
}

// Moment is a time as progress and refusals say it to people:
// "2026-01-02 15:04:05 UTC".
func Moment(at time.Time) string { return at.UTC().Format("2006-01-02 15:04:05 UTC") }

// Ruling is what a journal says of a request decided under an approval
// rule: the policy and rule, how it closed and who approved it.
type Ruling struct {
	Seq     int64
	Policy  string // "" for a request from before policies
	Rule    string
	Closing Closing // "" while it is open
	Voters  []string
	// BrokenBy is who had it executed by break-glass, "" for nobody;
	// RatifyBy is when its ratification window ends, Ratifiers who
	// ratified it, in order, and Ratified whether they meet its rule.
	BrokenBy  string
	RatifyBy  time.Time
	Ratifiers []string
	Ratified  bool
}

// Overdue reports whether it was executed by break-glass and its rule's
// quorum had not ratified that by the end of its window, at now: what
// verification flags.
func (r Ruling) Overdue(now time.Time) bool {
	return r.BrokenBy != "" && r.Closing == ClosedResumed && !r.Ratified && now.After(r.RatifyBy)
}

// String says it in a line: "seq=3 (rule large of policy 1f2e3d4c5b6a):
// resumed, approved by alice, bob".
func (r Ruling) String() string {
	s := fmt.Sprintf("seq=%d (rule %s", r.Seq, r.Rule)
	if r.Policy != "" {
		s += " of policy " + r.Policy // whole: what an auditor compares with sagacity policy
	}
	s += "): "
	if r.Closing == "" {
		s += "open"
	} else {
		s += string(r.Closing)
	}
	if r.BrokenBy != "" {
		s += " by break-glass (" + r.BrokenBy + ")"
	}
	if len(r.Voters) > 0 {
		s += ", approved by " + strings.Join(r.Voters, ", ")
	}
	switch {
	case r.BrokenBy != "" && r.Ratified:
		s += ", ratified by " + strings.Join(r.Ratifiers, ", ")
	case r.BrokenBy != "":
		s += ", unratified (its window ends at " + Moment(r.RatifyBy) + ")"
	}
	return s
}

// Flagged begins what Named adds of a break-glass execution its rule's
// quorum did not ratify in time: the journal holds, and says it.
const Flagged = "FLAGGED: "

// Named is v with the ruling of each executed request added to its
// message, as verification names them: "; seq=3 (rule large of policy
// 1f2e3d4c…, its whole SHA-256): resumed, approved by alice, bob"; and,
// for a break-glass execution not ratified by the end of its window at
// now, "; FLAGGED: the break-glass execution of seq=3 by carol was not
// ratified by …".
func Named(v Verification, rulings []Ruling, now time.Time) Verification {
	for _, r := range rulings {
		if r.Closing == ClosedResumed {
			v.Message += "; " + r.String()
		}
		if r.Overdue(now) {
			v.Message += fmt.Sprintf("; %sthe break-glass execution of seq=%d by %s was not ratified by its rule's quorum by %s",
				Flagged, r.Seq, r.BrokenBy, Moment(r.RatifyBy))
		}
	}
	return v
}

// Policies find the compiled policy of a hash; an error when they know
// none (the verification breaks).
type Policies func(hash string) (*Approvals, error)

// Keyring is what checks the passkey and delegated votes of a journal:
// the passkeys enrolled (PasskeySaga's journal, read when a vote needs
// them), the check of an assertion, and the delegations (DelegationSaga's
// journal, read likewise). Without Check, a journal with a passkey vote
// does not verify; without Delegations, one with a delegated vote.
type Keyring struct {
	Passkeys    func() (Passkeys, error)
	Check       CheckAssertion
	Delegations func() (Delegations, error)
}

// delegated says why delegated vote r under rule does not stand on a
// delegation, or "".
func (k Keyring) delegated(r Receipt, rule Rule) string {
	if k.Delegations == nil {
		return "delegations cannot be checked here"
	}
	ds, err := k.Delegations()
	if err != nil {
		return Message(err)
	}
	return ds.Delegated(r, rule)
}

// verify says why the passkey proof in a vote's receipt r does not
// hold, or "".
func (k Keyring) verify(r Receipt) string {
	if k.Check == nil || k.Passkeys == nil {
		return "passkey assertions cannot be checked here"
	}
	keys, err := k.Passkeys()
	if err != nil {
		return Message(err)
	}
	return VerifyPasskey(r, keys, k.Check)
}

// VerifyVotes checks a journal (ordered by seq, whose chain, lifecycle
// and receipts verify: lc is its lifecycle) against the approval rules
// its requests record. For each request: the rule its policy gives its
// bytes is the one it records; each approval's receipt (v verifies it)
// places it as the k-th standing vote of the rule's quorum, by one of the
// rule's approvers, cast before the deadline, from a sign-in recent
// enough for its step-up, with a reason when the rule requires one (so
// do rejections and requests for changes); a resumed request had its
// quorum, and was resumed after its wait timer (notBefore) and within
// its grant; an expired one had not, and
// only after its deadline. The first request that breaks a rule breaks
// the journal; the rulings of the requests are returned either way.
func VerifyVotes(entries []Entry, lc Lifecycle, policies Policies, v note.Verifier, keys Keyring) (Verification, []Ruling) {
	n := len(entries)
	var out []Ruling
	decisions := map[int64][]Entry{} // the approval gate's entries, by the request they name
	for _, en := range entries {
		if en.ToolName == GateTool && lc.Requests[en.Refers()] != nil {
			decisions[en.Refers()] = append(decisions[en.Refers()], en)
		}
	}
	bad := func(seq int64, format string, args ...any) (Verification, []Ruling) {
		i := int(seq - 1)
		return Broken(n, i, fmt.Sprintf("seq=%d (entry %d) ", seq, i)+fmt.Sprintf(format, args...)), out
	}
	if n > 0 && entries[0].SagaID == PolicySaga {
		if seq, why := policyChain(entries, lc); seq != 0 {
			return bad(seq, "%s", why)
		}
	}
	for _, seq := range lc.Order {
		l, gated := lc.Requests[seq], entries[seq-1]
		hash := gated.Field(KeyPolicy)
		rule := LegacyRule()
		if hash != "" {
			a, err := policies(hash)
			if err != nil {
				return bad(seq, "is a request under approval policy %s: %s", hash, Message(err))
			}
			if gated.Field(KeyRule) == "" {
				// No rule applied: the gate must have refused it at once,
				// for the reason its policy gives its bytes. The error's
				// words are not compared: another version of CEL may say
				// it otherwise.
				m, err := a.Gated(gated)
				if err != nil {
					return bad(seq, "%s", strings.TrimPrefix(Message(err), fmt.Sprintf("the request at seq=%d ", seq)))
				}
				if m.OK {
					return bad(seq, "records no approval rule, but its policy gives its bytes rule %q", m.Rule.Name)
				}
				refusal := entries[min(seq, int64(n)-1)]
				if detail, _, _ := refusal.Refusal(); l.Closed != seq+1 || detail != m.Refusal()[0].Value || GateRefusal(refusal).Failed != m.Failed {
					return bad(seq, "is a request its policy refuses (%s), which the gate did not refuse at once for that", m.Because())
				}
				out = append(out, Ruling{Seq: seq, Policy: hash, Closing: l.Closing})
				continue
			}
			if rule, err = a.Recorded(gated); err != nil {
				return bad(seq, "%s", strings.TrimPrefix(Message(err), fmt.Sprintf("the request at seq=%d ", seq)))
			}
		}
		ru := Ruling{Seq: seq, Policy: hash, Rule: rule.Name, Closing: l.Closing, BrokenBy: l.BrokenBy}
		// Each vote against the rule, in the order they were cast; the
		// ratifications of a break-glass execution after it.
		var standing, ratifying []Vote
		for _, en := range decisions[seq] {
			decision, decider, _ := en.Decision()
			if decision == DecidedExpired {
				continue // checked below, with the tally
			}
			r, err := OpenReceipt(ReceiptOf(en), v)
			if err != nil {
				return bad(en.Seq, "carries no receipt the key signed")
			}
			switch decision {
			case DecidedWithdrawn:
				standing = slices.DeleteFunc(standing, func(v Vote) bool { return v.Voter == decider })
				continue
			case DecidedDismissed, DecidedCancelled:
				continue // no vote: who may take it is the lifecycle's to check
			case DecidedBreakGlass:
				switch g := rule.BreakGlass; {
				case g == nil:
					return bad(en.Seq, "is a break-glass execution by %s, which rule %s does not allow (its policy has no breakGlass)", decider, rule.Name)
				case r.ApprovalPolicy == "" || !slices.Contains(g.Approvers, r.EligibleAs):
					return bad(en.Seq, "is a break-glass execution by %s as %q, which is none of the policy's breakGlass approvers (%s)", decider,
						r.EligibleAs, strings.Join(g.Approvers, ", "))
				case r.Reason == "":
					return bad(en.Seq, "is a break-glass execution by %s without a reason", decider)
				}
				ru.RatifyBy = en.Timestamp.Add(rule.BreakGlass.RatifyWithin)
			case DecidedRatified:
				vote := l.voteAt(en.Seq)
				switch before := (Tally{Rule: rule, Votes: ratifying}); {
				case before.Met():
					return bad(en.Seq, "is %s's ratification of the request at seq=%d, which its rule's quorum ratified already", decider, seq)
				case en.Timestamp.After(ru.RatifyBy):
					return bad(en.Seq, "is %s's ratification of the request at seq=%d after its window ended at %s", decider, seq, Moment(ru.RatifyBy))
				case rule.Thresholds != nil && before.placed(vote) != "":
					return bad(en.Seq, "is %s's ratification under rule %s's thresholds, which %s", decider, rule.Name, before.placed(vote))
				case rule.Thresholds != nil && !slices.Equal(r.Meets, vote.Meets):
					return bad(en.Seq, "is %s's ratification, which meets %q by its entry but %q by its receipt", decider,
						MeetsText(vote.Meets), MeetsText(r.Meets))
				}
				ratifying = append(ratifying, vote)
			case DecidedApproved:
				vote := l.voteAt(en.Seq)
				if rule.Thresholds != nil {
					before := Tally{Rule: rule, Votes: standing}
					switch why := before.placed(vote); {
					case why != "":
						return bad(en.Seq, "is %s's approval under rule %s's thresholds, which %s", decider, rule.Name, why)
					case !slices.Equal(r.Meets, vote.Meets):
						return bad(en.Seq, "is %s's approval, which meets %q by its entry but %q by its receipt", decider,
							MeetsText(vote.Meets), MeetsText(r.Meets))
					}
				}
				standing = append(standing, vote)
			}
			if rule.PasskeyRequired || r.Passkey != nil {
				if why := keys.verify(r); why != "" {
					return bad(en.Seq, "is a vote by %s that its passkey does not sign: %s", decider, why)
				}
			}
			if r.OnBehalfOf != "" {
				if why := keys.delegated(r, rule); why != "" {
					return bad(en.Seq, "is a vote by %s on behalf of %s that no delegation covers: %s", decider, r.OnBehalfOf, why)
				}
			}
			if r.ApprovalPolicy == "" {
				// Signed before votes were counted, when one approver
				// decided and the server checked who: nothing more to
				// read from it.
				continue
			}
			// An approval counts among the votes before the execution, a
			// ratification among those after it.
			counted, approval, word := standing, decision == DecidedApproved || decision == DecidedRatified, "approval"
			if decision == DecidedRatified {
				counted, word = ratifying, "ratification"
			}
			switch {
			case decision != DecidedBreakGlass && !slices.Contains(rule.Approvers, r.EligibleAs):
				return bad(en.Seq, "is a vote by %s as %q, which is none of rule %s's approvers (%s)", decider, r.EligibleAs,
					rule.Name, strings.Join(rule.Approvers, ", "))
			case rule.ReasonRequired && r.Reason == "":
				return bad(en.Seq, "is a vote by %s without a reason, which rule %s requires", decider, rule.Name)
			case rule.StepUp > 0 && (r.AuthTime.IsZero() || r.AuthTime.Before(en.Timestamp.Add(-rule.StepUp).Truncate(time.Second))):
				return bad(en.Seq, "is a vote by %s from a sign-in older than rule %s's step-up of %s", decider, rule.Name, rule.StepUp)
			case decision != DecidedRatified && rule.Expires > 0 && en.Timestamp.After(gated.Timestamp.Add(rule.Expires)):
				return bad(en.Seq, "is a vote by %s after the request at seq=%d expired", decider, seq)
			case approval && (r.Vote != len(counted) || r.Quorum != (Tally{Rule: rule, Votes: counted}).Quorum()):
				return bad(en.Seq, "is %s's %s, signed as vote %d of %d, but it is vote %d of %d under rule %s", decider, word,
					r.Vote, r.Quorum, len(counted), (Tally{Rule: rule, Votes: counted}).Quorum(), rule.Name)
			case approval && rule.Thresholds == nil && (r.Meets != nil || l.voteAt(en.Seq).Meets != nil):
				return bad(en.Seq, "is %s's %s, placed in thresholds that rule %s does not have", decider, word, rule.Name)
			case !approval && r.Vote != 0:
				return bad(en.Seq, "is %s's %s, signed as vote %d of %d", decider, decision, r.Vote, r.Quorum)
			}
		}
		t := Count(gated, l, rule)
		ru.Voters = t.Voters()
		ru.Ratifiers, ru.Ratified = voters(ratifying), l.BrokenAt != 0 && (Tally{Rule: rule, Votes: ratifying}).Met()
		out = append(out, ru)
		if l.Closed == 0 {
			continue
		}
		closing := entries[l.Closed-1]
		switch l.Closing {
		case ClosedResumed:
			switch by := closing.Field(KeyExecutedBy); {
			case l.BrokenAt != 0 && (by != ExecutedByServer || closing.Field(KeyRequester) != gated.Field(KeyRequester)):
				return bad(closing.Seq, "is the execution of the request at seq=%d that %s broke the glass on, but not the server's for %s, "+
					"who made it", seq, l.BrokenBy, gated.Field(KeyRequester))
			case l.BrokenAt != 0:
				// A break-glass execution bypasses the quorum and its
				// clocks; its ratification is checked above.
			case by != "" && (by != ExecutedByServer || !rule.OnApproval):
				return bad(closing.Seq, "is an execution of the request at seq=%d by %q, but rule %s does not execute on approval: "+
					"only its requester's resume may execute it", seq, by, rule.Name)
			case by != "" && closing.Field(KeyRequester) != gated.Field(KeyRequester):
				return bad(closing.Seq, "is the server's execution of the request at seq=%d for %s, who did not make it (%s did)", seq,
					closing.Field(KeyRequester), gated.Field(KeyRequester))
			case !t.Met():
				return bad(closing.Seq, "executes the request at seq=%d with %s", seq, t.Progress())
			case t.Early(closing.Timestamp):
				return bad(closing.Seq, "executes the request at seq=%d at %s, before its wait of %s (rule %s) ended at %s", seq,
					Moment(closing.Timestamp), rule.NotBefore, rule.Name, Moment(t.RunsFrom))
			case t.Lapsed(closing.Timestamp):
				return bad(closing.Seq, "executes the request at seq=%d after its grant ended at %s", seq,
					t.GrantUntil.UTC().Format(time.RFC3339))
			}
		case ClosedExpired:
			if !t.Expired(closing.Timestamp) {
				return bad(closing.Seq, "expires the request at seq=%d, which had not expired (%s, deadline %s)", seq, t.Progress(),
					t.Deadline.UTC().Format(time.RFC3339))
			}
		}
	}
	return Verification{Valid: true, EntryCount: n, BreakAtIndex: -1, Message: fmt.Sprintf("all %d entries verified", n)}, out
}
