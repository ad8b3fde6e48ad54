package evidence

import (
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"slices"
)

// Matched is what a policy gives a request: the rule that applies (OK),
// or none, and the gate refuses it. Failed names the rule whose
// condition could not be evaluated for it, and Why says how, when that
// refused it; both are "" when no rule's condition held.
type Matched struct {
	Rule        Rule
	OK          bool
	Failed, Why string
}

// The gate's refusals of a request no rule applies to.
const (
	// RefusedNoRule refuses, at the gate, a request no rule of the
	// approval policy applies to: nobody could approve it.
	RefusedNoRule = "no rule of the approval policy applies to this request"
	// RefusedCondition refuses, at the gate, a request for which a
	// rule's condition could not be evaluated (its rule does not say
	// onError: skip); its entry names the rule and the error.
	RefusedCondition = "an approval rule's condition could not be evaluated for this request"
)

// Refusal is the detail the gate journals when it refuses the request
// (its REJECTED entry's payload), and which verification expects there:
// RefusedNoRule, or RefusedCondition with the rule and the error.
func (m Matched) Refusal() Lines {
	if m.Failed == "" {
		return Lines{{Value: RefusedNoRule}}
	}
	return Lines{{Value: RefusedCondition}, {KeyRule, m.Failed}, {KeyError, m.Why}}
}

// Because says in words why the gate refused the request.
func (m Matched) Because() string {
	if m.Failed == "" {
		return RefusedNoRule
	}
	return fmt.Sprintf("%s (rule %s: %s)", RefusedCondition, m.Failed, m.Why)
}

// GateRefusal reads what the gate's refusal entry says as a Matched.
func GateRefusal(refusal Entry) Matched {
	return Matched{Failed: refusal.Field(KeyRule), Why: refusal.Field(KeyError)}
}

// Match returns what applies to a request of tool in saga by requester
// with input: the first rule whose condition holds among the tool's
// rules, or the default's for a tool without rules of its own; or none
// (the request is refused). A condition that cannot be evaluated (a
// missing field, a wrong type, too costly, or input that is no JSON
// object) refuses the request, unless its rule says onError: skip, when
// it does not hold.
//
// c is what the request's conditions see of who asked and when (See), nil
// under a policy whose conditions read none (UsesContext); a condition
// that reads it without one cannot be evaluated.
func (a *Approvals) Match(tool, saga, requester, input string, c *Context) Matched {
	var payload map[string]any
	object := json.Unmarshal([]byte(input), &payload) == nil && payload != nil
	vars := map[string]any{"payload": payload, "tool": tool, "saga": saga, "requester": requester}
	if c != nil {
		vars["who"], vars["now"] = c.Who, c.Now
	}
	for _, r := range a.Rules(tool) {
		if r.prog == nil {
			return Matched{Rule: r, OK: true}
		}
		why := "the input is not a JSON object"
		if object {
			holds, err := r.holds(vars)
			switch {
			case err == nil && holds:
				return Matched{Rule: r, OK: true}
			case err == nil:
				continue
			}
			why = err.Error()
		}
		if !r.SkipOnError {
			return Matched{Failed: r.Name, Why: CleanLine(why)}
		}
	}
	return Matched{}
}

// holds evaluates r's condition with vars.
func (r Rule) holds(vars map[string]any) (bool, error) {
	out, _, err := r.prog.Eval(vars)
	if err != nil {
		return false, err
	}
	holds, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("the condition gave a %s, not a boolean", out.Type().TypeName())
	}
	return holds, nil
}

// Gated is what a policy gives a request (its AWAITING_APPROVAL entry
// gated): Match of its bytes, by its requester, in the context it
// journaled. An *Error when the context it journaled is not one the
// policy reads (contextOf).
func (a *Approvals) Gated(gated Entry) (Matched, error) {
	c, err := a.contextOf(gated)
	if err != nil {
		return Matched{}, err
	}
	return a.Match(gated.ToolName, gated.SagaID, gated.Field(KeyRequester), gated.Input, c), nil
}

// Recorded finds the rule a policy gives the bytes of a request (its
// AWAITING_APPROVAL entry gated), in the context it journaled, which must
// be the one the entry records: an entry that records another (written
// into the database to pass for a laxer rule) decides nothing. An *Error
// otherwise.
func (a *Approvals) Recorded(gated Entry) (Rule, error) {
	name := gated.Field(KeyRule)
	m, err := a.Gated(gated)
	if err != nil {
		return Rule{}, err
	}
	if !m.OK || m.Rule.Name != name {
		gives := "no rule"
		switch {
		case m.OK:
			gives = fmt.Sprintf("rule %q", m.Rule.Name)
		case m.Failed != "":
			gives = fmt.Sprintf("no rule (rule %q's condition cannot be evaluated for them)", m.Failed)
		}
		return Rule{}, errorf("the request at seq=%d records approval rule %q, but its policy gives its bytes %s: nothing is decided on it",
			gated.Seq, name, gives)
	}
	return m.Rule, nil
}

// LegacyRule decides a request made before requests recorded a policy:
// one person with the approver role.
func LegacyRule() Rule {
	return Rule{Name: "default", Approvers: []string{string(RoleApprover)}, Quorum: 1}
}

// Rules are the rules a request of tool is matched against, in order:
// the tool's own, or the default's; for PolicyTool, the policyChange
// rules (none: no change is gated).
func (a *Approvals) Rules(tool string) []Rule {
	if tool == PolicyTool {
		return a.change
	}
	if own, ok := a.tools[tool]; ok {
		return own
	}
	return a.fallback
}

// Default are the rules of tools without rules of their own, in order.
func (a *Approvals) Default() []Rule { return a.fallback }

// Tools lists the tools with rules of their own, by name.
func (a *Approvals) Tools() []string { return slices.Sorted(maps.Keys(a.tools)) }

// Rule returns the rule of tool named name.
func (a *Approvals) Rule(tool, name string) (Rule, bool) {
	for _, r := range a.Rules(tool) {
		if r.Name == name {
			return r, true
		}
	}
	return Rule{}, false
}

// Eligible reports whether a person holding roles, in groups, may vote
// under r: r's approvers name one of them. Deciding at all takes the
// approver role besides (the engine's Can).
func (r Rule) Eligible(roles []Role, groups []string) bool { return r.EligibleAs(roles, groups) != "" }

// EligibleAs is the first of r's approvers (a role or a group) that a
// person holding roles, in groups, is, which their votes' receipts
// record; "" when none.
func (r Rule) EligibleAs(roles []Role, groups []string) string {
	for _, a := range r.Approvers {
		if slices.Contains(roles, Role(a)) || slices.Contains(groups, a) {
			return a
		}
	}
	return ""
}

// All yields every rule, the default's first, with where it stands:
// "default" or "tool <name>".
func (a *Approvals) All() iter.Seq2[string, Rule] {
	return func(yield func(string, Rule) bool) {
		for _, r := range a.fallback {
			if !yield("default", r) {
				return
			}
		}
		for _, tool := range a.Tools() {
			for _, r := range a.tools[tool] {
				if !yield("tool "+tool, r) {
					return
				}
			}
		}
		for _, r := range a.change {
			if !yield("policyChange", r) {
				return
			}
		}
	}
}
