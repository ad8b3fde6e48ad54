package evidence

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A rule's thresholds are alternatives, each a list of requirements that
// must all be met ("one from finance and one from security"; "two
// approvals, or one from treasury"). An approval is placed when it is
// cast, in each alternative, in the first requirement still short that
// its voter may meet; its entry and its receipt record where (Meets), so
// that the tally, on the server and offline, is the placed votes' and
// never depends on who holds which group later. One person meets one
// requirement of an alternative, never two; an approval that would meet
// no requirement still short is refused.

// MeetsText writes a placement as an entry and a receipt carry it: the
// requirement met in each alternative, from 1, or "-" for none ("1 -").
func MeetsText(meets []int) string {
	words := make([]string, len(meets))
	for i, m := range meets {
		words[i] = "-"
		if m > 0 {
			words[i] = strconv.Itoa(m)
		}
	}
	return strings.Join(words, " ")
}

// ParseMeets reads MeetsText's text; nil for "". An *Error for anything
// MeetsText would not write.
func ParseMeets(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, w := range strings.Split(s, " ") {
		m := 0
		if w != "-" {
			n, err := strconv.Atoi(w)
			if err != nil || n < 1 || n > MaxThresholds || strconv.Itoa(n) != w {
				return nil, errorf("with a placement %q that is none (meets: a requirement's number or - per alternative)", s)
			}
			m = n
		}
		out = append(out, m)
	}
	return out, nil
}

// Standing is where one requirement stands.
type Standing struct {
	Requirement
	// Label names it for people (Requirement.Label).
	Label string
	// Voters are those whose standing approvals meet it, in order.
	Voters []string
}

// Short is how many more approvals the requirement needs.
func (s Standing) Short() int { return max(s.Count-len(s.Voters), 0) }

// Requirements are where each alternative's requirements stand: one
// alternative, a requirement of the plain quorum of the rule's
// approvers, for a rule without thresholds.
func (t Tally) Requirements() [][]Standing {
	alts := t.Rule.Thresholds
	if alts == nil {
		alts = [][]Requirement{{{Count: max(t.Rule.Quorum, 1)}}}
	}
	out := make([][]Standing, len(alts))
	for i, alt := range alts {
		for _, q := range alt {
			out[i] = append(out[i], Standing{Requirement: q, Label: q.Label(t.Rule)})
		}
	}
	for _, v := range t.Votes {
		for i := range out {
			j := 1 // a plain quorum: every approval meets its one requirement
			if t.Rule.Thresholds != nil {
				j = 0
				if i < len(v.Meets) {
					j = v.Meets[i]
				}
			}
			if j >= 1 && j <= len(out[i]) {
				out[i][j-1].Voters = append(out[i][j-1].Voters, v.Voter)
			}
		}
	}
	return out
}

// StillShort names who may still meet the rule, as the votes stand: its
// approvers under a plain quorum; under thresholds the groups of the
// requirements still short (the rule's approvers for one open to any).
func (t Tally) StillShort() []string {
	if t.Rule.Thresholds == nil {
		return t.Rule.Approvers
	}
	var out []string
	for _, alt := range t.Requirements() {
		for _, q := range alt {
			from := []string{q.From}
			if q.From == "" {
				from = t.Rule.Approvers
			}
			for _, g := range from {
				if q.Short() > 0 && !slices.Contains(out, g) {
					out = append(out, g)
				}
			}
		}
	}
	return out
}

// needed is the fewest more approvals that would meet the rule.
func (t Tally) needed() int {
	fewest := -1
	for _, alt := range t.Requirements() {
		n := 0
		for _, s := range alt {
			n += s.Short()
		}
		if fewest < 0 || n < fewest {
			fewest = n
		}
	}
	return fewest
}

// Quorum is how many approvals meet the rule, given those standing: the
// rule's quorum under a plain one; the standing ones and the fewest more
// that would meet it under thresholds. It is what a request's row and an
// approval's receipt ("vote 2 of 3") record.
func (t Tally) Quorum() int {
	if t.Rule.Thresholds == nil {
		return max(t.Rule.Quorum, 1)
	}
	return len(t.Votes) + t.needed()
}

// Place is where an approval by a person holding roles, in groups, would
// count, as the votes stand: in each alternative of the rule's
// thresholds, the first requirement still short that they may meet
// (Meets). ok is false when it would meet none. Under a plain quorum it
// is nil, and ok.
func (t Tally) Place(roles []Role, groups []string) (meets []int, ok bool) {
	if t.Rule.Thresholds == nil {
		return nil, true
	}
	meets = make([]int, len(t.Rule.Thresholds))
	for i, alt := range t.Requirements() {
		for j, s := range alt {
			holds := slices.Contains(roles, Role(s.From)) || slices.Contains(groups, s.From)
			if s.From == "" {
				holds = t.Rule.Eligible(roles, groups)
			}
			if s.Short() > 0 && holds {
				meets[i], ok = j+1, true
				break
			}
		}
	}
	return meets, ok
}

// placed says why approval v, cast when the votes stood as t has them,
// is not placed as the rule's thresholds allow, or "": one placement per
// alternative, each in a requirement still short then, and at least one.
func (t Tally) placed(v Vote) string {
	alts := t.Requirements()
	if len(v.Meets) != len(alts) {
		return fmt.Sprintf("meets %d alternatives of the rule's %d", len(v.Meets), len(alts))
	}
	some := false
	for i, j := range v.Meets {
		switch {
		case j == 0:
			continue
		case j > len(alts[i]):
			return fmt.Sprintf("meets requirement %d of an alternative that has %d", j, len(alts[i]))
		case alts[i][j-1].Short() == 0:
			return fmt.Sprintf("meets the requirement %s, met already", alts[i][j-1].Label)
		}
		some = true
	}
	if !some {
		return "meets no requirement"
	}
	return ""
}

// progressOf says where the votes stand under thresholds, for people:
// "1 approval (alice): finance 1 of 1 (alice), security 0 of 1; waiting
// for 1 more from security".
func (t Tally) progressOf() string {
	s := fmt.Sprintf("%d approval", len(t.Votes))
	if len(t.Votes) != 1 {
		s += "s"
	}
	if len(t.Votes) > 0 {
		s += " (" + strings.Join(t.Voters(), ", ") + ")"
	}
	var stands, waits []string
	for _, alt := range t.Requirements() {
		var st, wait []string
		for _, q := range alt {
			w := fmt.Sprintf("%s %d of %d", q.Label, len(q.Voters), q.Count)
			if len(q.Voters) > 0 {
				w += " (" + strings.Join(q.Voters, ", ") + ")"
			}
			st = append(st, w)
			if n := q.Short(); n > 0 {
				wait = append(wait, fmt.Sprintf("%d more from %s", n, q.Label))
			}
		}
		stands = append(stands, strings.Join(st, ", "))
		if len(wait) > 0 {
			waits = append(waits, strings.Join(wait, " and "))
		}
	}
	s += ": " + strings.Join(stands, "; or ")
	if !t.Met() {
		s += "; waiting for " + strings.Join(waits, ", or ")
	}
	return s
}

// Who says who must approve under the rule, for people: "2 of
// finance-leads, treasury"; "1 from finance and 1 from security"; "2 of
// any of approver or treasury, or 1 from treasury".
func (r Rule) Who() string {
	if r.Thresholds == nil {
		return fmt.Sprintf("%d of %s", max(r.Quorum, 1), strings.Join(r.Approvers, ", "))
	}
	var alts []string
	for _, alt := range r.Thresholds {
		var qs []string
		for _, q := range alt {
			if q.From == "" {
				qs = append(qs, fmt.Sprintf("%d of %s", q.Count, q.Label(r)))
			} else {
				qs = append(qs, fmt.Sprintf("%d from %s", q.Count, q.From))
			}
		}
		alts = append(alts, strings.Join(qs, " and "))
	}
	return strings.Join(alts, ", or ")
}

// Eligibility is what makes a person eligible to vote: their roles and
// groups.
type Eligibility struct {
	Roles  []Role
	Groups []string
}

// meets reports whether a person of eligibility p may meet requirement
// q of rule r.
func (r Rule) meets(p Eligibility, q Requirement) bool {
	if q.From == "" {
		return r.Eligible(p.Roles, p.Groups)
	}
	return slices.Contains(p.Roles, Role(q.From)) || slices.Contains(p.Groups, q.From)
}

// Meetable reports whether distinct people could meet rule r between
// them, one requirement each per alternative: whether, for one
// alternative, each of its requirements' places can go to a person of
// its own (a matching of people to places).
func (r Rule) Meetable(people []Eligibility) bool {
	alts := r.Thresholds
	if alts == nil {
		alts = [][]Requirement{{{Count: max(r.Quorum, 1)}}}
	}
	for _, alt := range alts {
		var places []Requirement
		for _, q := range alt {
			for range q.Count {
				places = append(places, q)
			}
		}
		holder := make([]int, len(places)) // the person given each place, +1
		// give finds person i a place, moving others to free one.
		var give func(i int, seen []bool) bool
		give = func(i int, seen []bool) bool {
			for j, q := range places {
				if seen[j] || !r.meets(people[i], q) {
					continue
				}
				seen[j] = true
				if holder[j] == 0 || give(holder[j]-1, seen) {
					holder[j] = i + 1
					return true
				}
			}
			return false
		}
		given := 0
		for i := range people {
			if give(i, make([]bool, len(places))) {
				given++
			}
		}
		if given == len(places) {
			return true
		}
	}
	return false
}
