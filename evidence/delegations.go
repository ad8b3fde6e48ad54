package evidence

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// An approver away for a while hands their eligibility under named rules
// to a colleague for a window of time: a delegation. While it stands,
// the delegate may vote on a request under one of those rules on the
// delegator's behalf, eligible by the roles and groups the delegator had
// when they delegated, as the delegation records them; the vote counts
// as the delegator's. Each delegation and each revocation is journaled,
// signed, in the server's own saga DelegationSaga, so in the global log;
// a delegated vote's receipt names the delegator and the delegation's
// entry, and verification, on the server and offline, checks the vote
// against that entry: a delegation forged, edited or revoked before the
// vote, or a vote outside its window or rules, breaks the journal.

// DelegationSaga is the saga whose journal holds every delegation and
// revocation.
const DelegationSaga = "sagacity:delegations"

// The tools of DelegationSaga's entries.
const (
	Delegated         = "delegated"
	DelegationRevoked = "delegation-revoked"
)

// Bounds of a delegation.
const (
	// MaxDelegation is the longest window a delegation may stand.
	MaxDelegation = 90 * 24 * time.Hour
	// MaxDelegatedRules bounds the rules one delegation names.
	MaxDelegatedRules = 20
)

// DelegationNotes are what the server signs of DelegationSaga's entries
// (Form.EntryNote).
var DelegationNotes = Form{Header: "sagacity delegation v1", Keys: []string{Delegated, DelegationRevoked}}

// DelegationRecord is a DelegationSaga entry's input: a delegation's
// whole record, or a revocation's delegation (its seq), delegator,
// delegate and who revoked it.
type DelegationRecord struct {
	From   string   `json:"from"`
	To     string   `json:"to"`
	Rules  []string `json:"rules,omitempty"`
	Roles  []Role   `json:"roles,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// Start and Until bound the window, Until excluded (TimeLayout).
	Start  string `json:"start,omitempty"`
	Until  string `json:"until,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Seq and By are a revocation's: the delegation's entry, and who
	// revoked it (its delegator or its delegate).
	Seq int64  `json:"seq,omitempty"`
	By  string `json:"by,omitempty"`
}

// Delegation is a delegation as DelegationSaga's journal has it.
type Delegation struct {
	Seq      int64 // its entry in DelegationSaga
	From, To string
	Rules    []string
	// Roles and Groups are the delegator's when they delegated: what the
	// delegate is eligible by on their behalf.
	Roles        []Role
	Groups       []string
	Start, Until time.Time
	Reason       string
	Made         time.Time // when it was journaled
	// Revoked is when it was revoked (zero while it stands), RevokedSeq
	// the entry, and RevokedBy who revoked it.
	Revoked    time.Time
	RevokedSeq int64
	RevokedBy  string
}

// Covers reports whether d lets its delegate vote under rule at at: the
// rule is one it names, at is in its window, and it was not revoked by
// then.
func (d Delegation) Covers(rule string, at time.Time) bool {
	return slices.Contains(d.Rules, rule) && !at.Before(d.Start) && at.Before(d.Until) && (d.Revoked.IsZero() || at.Before(d.Revoked))
}

// State says where d stands at at, for people: "revoked", "ended", "not
// started" or "standing".
func (d Delegation) State(at time.Time) string {
	switch {
	case !d.Revoked.IsZero() && !at.Before(d.Revoked):
		return "revoked"
	case !at.Before(d.Until):
		return "ended"
	case at.Before(d.Start):
		return "not started"
	}
	return "standing"
}

// Delegations are the delegations of DelegationSaga's journal, as the
// server signed them, by their entry's seq.
type Delegations map[int64]Delegation

// ReadDelegations reads DelegationSaga's entries (ordered by seq, or a
// part of them, such as an export's, holding each delegation a
// revocation names): each must be a delegation or revocation the key v
// signed, a delegation well formed (CheckDelegation), a revocation of one
// standing then, by its delegator or delegate. An *Error naming the first
// that is not.
func ReadDelegations(entries []Entry, v note.Verifier) (Delegations, error) {
	ds := Delegations{}
	for _, en := range entries {
		bad := func(why string) (Delegations, error) {
			return nil, errorf("seq=%d of %s is no delegation entry the key signed: %s", en.Seq, DelegationSaga, why)
		}
		if en.Phase != PhaseExecuted || (en.ToolName != Delegated && en.ToolName != DelegationRevoked) {
			return bad("it is a " + string(en.Phase) + " entry of " + en.ToolName)
		}
		if why := DelegationNotes.Unsigned(en, v); why != "" {
			return bad(why)
		}
		var r DelegationRecord
		if err := json.Unmarshal([]byte(en.Input), &r); err != nil {
			return bad("its record cannot be read")
		}
		if en.ToolName == DelegationRevoked {
			d, ok := ds[r.Seq]
			switch {
			case !ok || d.From != r.From || d.To != r.To:
				return bad(fmt.Sprintf("it revokes seq=%d, no delegation from %s to %s", r.Seq, r.From, r.To))
			case !d.Revoked.IsZero():
				return bad(fmt.Sprintf("it revokes seq=%d again", r.Seq))
			case r.By != d.From && r.By != d.To:
				return bad(fmt.Sprintf("it was revoked by %s, neither its delegator nor its delegate", r.By))
			}
			d.Revoked, d.RevokedSeq, d.RevokedBy = en.Timestamp, en.Seq, r.By
			ds[r.Seq] = d
			continue
		}
		d, err := r.Delegation()
		if err == nil {
			err = CheckDelegation(d, en.Timestamp)
		}
		if err != nil {
			return bad(Message(err))
		}
		d.Seq, d.Made = en.Seq, en.Timestamp
		ds[en.Seq] = d
	}
	return ds, nil
}

// Record is d as its entry's input holds it.
func (d Delegation) Record() DelegationRecord {
	return DelegationRecord{From: d.From, To: d.To, Rules: d.Rules, Roles: d.Roles, Groups: d.Groups,
		Start: d.Start.UTC().Format(TimeLayout), Until: d.Until.UTC().Format(TimeLayout), Reason: d.Reason}
}

// Delegation is the delegation r records. An *Error when its window
// cannot be read.
func (r DelegationRecord) Delegation() (Delegation, error) {
	start, err1 := time.Parse(time.RFC3339Nano, r.Start)
	until, err2 := time.Parse(time.RFC3339Nano, r.Until)
	if err1 != nil || err2 != nil {
		return Delegation{}, errorf("its window cannot be read")
	}
	return Delegation{From: r.From, To: r.To, Rules: r.Rules, Roles: r.Roles, Groups: r.Groups, Start: start, Until: until, Reason: r.Reason}, nil
}

// CheckDelegation says what is wrong with delegation d, made at at: a
// delegator and a delegate, not the same; one to MaxDelegatedRules rules,
// each once; a window ending after at, after its start, no longer than
// MaxDelegation; a delegator holding the approver role. An *Error naming
// it, or nil.
func CheckDelegation(d Delegation, at time.Time) error {
	rules := slices.Clone(d.Rules)
	slices.Sort(rules)
	switch {
	case d.From == "" || d.To == "":
		return errorf("a delegation names its delegator and its delegate")
	case d.From == d.To:
		return errorf("%s cannot delegate to themselves", d.From)
	case len(d.Rules) == 0 || len(d.Rules) > MaxDelegatedRules:
		return errorf("a delegation names 1 to %d approval rules, not %d", MaxDelegatedRules, len(d.Rules))
	case len(slices.Compact(rules)) != len(rules) || slices.Contains(rules, ""):
		return errorf("a delegation names each approval rule once: %s", strings.Join(d.Rules, ", "))
	case !d.Until.After(d.Start):
		return errorf("a delegation's window ends after it starts (from %s until %s)", Moment(d.Start), Moment(d.Until))
	case !d.Until.After(at):
		return errorf("a delegation's window ends in the future, not at %s", Moment(d.Until))
	case d.Until.Sub(d.Start) > MaxDelegation:
		return errorf("a delegation stands at most %s, not %s", MaxDelegation, d.Until.Sub(d.Start))
	case !slices.Contains(d.Roles, RoleApprover):
		return errorf("%s has no approver role to delegate", d.From)
	}
	return nil
}

// Delegated says why a vote whose receipt r says it was cast on behalf
// of r.OnBehalfOf, under rule, does not stand on a delegation of ds, or
// "": the delegation at r.Delegation is from that person to the decider,
// covers the rule at the vote's time, and makes the decider eligible as
// r.EligibleAs.
func (ds Delegations) Delegated(r Receipt, rule Rule) string {
	d, ok := ds[r.Delegation]
	switch {
	case !ok:
		return fmt.Sprintf("it names delegation seq=%d of %s, which is not there", r.Delegation, DelegationSaga)
	case d.From != r.OnBehalfOf || d.To != r.Decider:
		return fmt.Sprintf("delegation seq=%d is from %s to %s", d.Seq, d.From, d.To)
	case !slices.Contains(d.Rules, rule.Name):
		return fmt.Sprintf("delegation seq=%d does not name rule %s (%s)", d.Seq, rule.Name, strings.Join(d.Rules, ", "))
	case !d.Revoked.IsZero() && !r.Time.Before(d.Revoked):
		return fmt.Sprintf("delegation seq=%d was revoked at %s, before the vote", d.Seq, Moment(d.Revoked))
	case !d.Covers(rule.Name, r.Time):
		return fmt.Sprintf("the vote at %s is outside delegation seq=%d's window, from %s until %s", Moment(r.Time), d.Seq,
			Moment(d.Start), Moment(d.Until))
	case r.EligibleAs != "" && rule.EligibleAs(d.Roles, d.Groups) != r.EligibleAs:
		return fmt.Sprintf("delegation seq=%d does not make %s eligible as %q", d.Seq, r.OnBehalfOf, r.EligibleAs)
	}
	return ""
}
