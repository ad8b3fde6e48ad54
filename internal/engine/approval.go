package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
)

// An approval policy says who must approve a request of an IRREVERSIBLE
// tool, how many of them, and until when: per tool and as a default, an
// ordered list of rules, the first whose condition holds for the exact
// request applying. It is compiled once, at start-up; a policy that does
// not compile is refused, naming the tool, the rule and the column.

// RuleSpec is one rule as the configuration writes it.
type RuleSpec struct {
	// Name names the rule in journals and receipts; "<tool>#<n>" (or
	// "default#<n>") when empty, n counting from 1.
	Name string `json:"name,omitempty"`
	// When is a CEL condition over payload (the input parsed as a JSON
	// object), tool, saga and requester; empty, the rule always applies.
	When string `json:"when,omitempty"`
	// Approvers are the roles or groups whose members may vote; the
	// approver role when empty.
	Approvers []string `json:"approvers,omitempty"`
	// Quorum is how many distinct people must approve; 1 when 0.
	Quorum int `json:"quorum,omitempty"`
}

// PolicySpec is the approval policy as the configuration writes it.
type PolicySpec struct {
	Default []RuleSpec            `json:"default,omitempty"`
	Tools   map[string][]RuleSpec `json:"tools,omitempty"`
}

// Rule is a compiled rule. Its quorum is one (CompilePolicy refuses
// others until votes are counted).
type Rule struct {
	Name      string
	Approvers []string
	prog      cel.Program // nil without a condition
}

// Approvals is a compiled approval policy.
type Approvals struct {
	// Text is the policy's canonical document (JSON, rules in order,
	// names and defaults filled in); Hash is its hex SHA-256, which
	// every request records.
	Text, Hash string
	tools      map[string][]Rule
	fallback   []Rule
}

// conditionCost bounds what evaluating one condition may cost (CEL's
// cost units, roughly one per value visited).
const conditionCost = 100_000

// DefaultPolicy is the policy without configuration: one approver
// approves any request.
var DefaultPolicy = PolicySpec{Default: []RuleSpec{{Name: "default", Approvers: []string{string(RoleApprover)}, Quorum: 1}}}

// CompilePolicy compiles spec: every condition must parse, type-check to
// a boolean, and name only payload, tool, saga and requester.
func CompilePolicy(spec PolicySpec) (*Approvals, error) {
	env, err := cel.NewEnv(
		cel.Variable("payload", cel.DynType),
		cel.Variable("tool", cel.StringType),
		cel.Variable("saga", cel.StringType),
		cel.Variable("requester", cel.StringType),
	)
	if err != nil {
		return nil, err
	}
	canon := PolicySpec{Tools: map[string][]RuleSpec{}}
	a := &Approvals{tools: map[string][]Rule{}}
	// compile compiles the rules of owner (a tool, or "default"), as
	// messages name it (label).
	compile := func(owner, label string, specs []RuleSpec) ([]RuleSpec, []Rule, error) {
		var outSpecs []RuleSpec
		var rules []Rule
		names := map[string]bool{}
		for i, rs := range specs {
			if rs.Name == "" {
				rs.Name = fmt.Sprintf("%s#%d", owner, i+1)
			}
			where := fmt.Sprintf("%s, rule %d (%s)", label, i+1, rs.Name)
			if err := validName("rule name", rs.Name); err != nil || strings.ContainsAny(rs.Name, " \n") {
				return nil, nil, fmt.Errorf("%s: a rule's name must be printable, without spaces", where)
			}
			if names[rs.Name] {
				return nil, nil, fmt.Errorf("%s: another rule of %s has that name", where, label)
			}
			names[rs.Name] = true
			if len(rs.Approvers) == 0 {
				rs.Approvers = []string{string(RoleApprover)}
			}
			if rs.Quorum == 0 {
				rs.Quorum = 1
			}
			if rs.Quorum < 1 {
				return nil, nil, fmt.Errorf("%s: quorum must be at least 1", where)
			}
			// Quorums are not counted yet: a rule that asks for one would
			// be silently weaker than written.
			if rs.Quorum != 1 {
				return nil, nil, fmt.Errorf("%s: a quorum above 1 is not enforced by this version; a request is approved by one "+
					"person of the rule's approvers", where)
			}
			for _, g := range rs.Approvers {
				if err := validName("approvers", g); err != nil {
					return nil, nil, fmt.Errorf("%s: %w", where, err)
				}
			}
			r := Rule{Name: rs.Name, Approvers: slices.Clone(rs.Approvers)}
			if rs.When != "" {
				ast, iss := env.Compile(rs.When)
				if iss != nil && iss.Err() != nil {
					e := iss.Errors()[0]
					return nil, nil, fmt.Errorf("%s: condition, column %d: %s", where, e.Location.Column()+1, e.Message)
				}
				if ast.OutputType() != cel.BoolType {
					return nil, nil, fmt.Errorf("%s: condition is a %s, not a boolean", where, ast.OutputType())
				}
				if r.prog, err = env.Program(ast, cel.CostLimit(conditionCost)); err != nil {
					return nil, nil, fmt.Errorf("%s: condition: %w", where, err)
				}
			}
			outSpecs, rules = append(outSpecs, rs), append(rules, r)
		}
		return outSpecs, rules, nil
	}
	if canon.Default, a.fallback, err = compile("default", "default", spec.Default); err != nil {
		return nil, err
	}
	for _, tool := range slices.Sorted(maps.Keys(spec.Tools)) {
		s, rules, err := compile(tool, "tool "+tool, spec.Tools[tool])
		if err != nil {
			return nil, err
		}
		canon.Tools[tool], a.tools[tool] = s, rules
	}
	var text bytes.Buffer
	enc := json.NewEncoder(&text)
	enc.SetEscapeHTML(false) // conditions keep their < and >, as written
	if err := enc.Encode(canon); err != nil {
		return nil, err
	}
	a.Text = strings.TrimSuffix(text.String(), "\n")
	sum := sha256.Sum256([]byte(a.Text))
	a.Hash = hex.EncodeToString(sum[:])
	return a, nil
}

// Match returns the rule that applies to a request of tool in saga by
// requester with input: the first whose condition holds among the tool's
// rules, or the default's for a tool without rules of its own; false when
// none does (the request is refused). A
// condition that fails to evaluate (a missing field, a wrong type, too
// costly) does not hold; a request whose input is not a JSON object
// matches only rules without a condition.
func (a *Approvals) Match(tool, saga, requester, input string) (Rule, bool) {
	var payload map[string]any
	object := json.Unmarshal([]byte(input), &payload) == nil && payload != nil
	vars := map[string]any{"payload": payload, "tool": tool, "saga": saga, "requester": requester}
	rules := a.fallback
	if own, ok := a.tools[tool]; ok {
		rules = own
	}
	for _, r := range rules {
		if r.prog == nil {
			return r, true
		}
		if !object {
			continue
		}
		if out, _, err := r.prog.Eval(vars); err == nil && out.Value() == true {
			return r, true
		}
	}
	return Rule{}, false
}

// Eligible reports whether p may vote under r: p holds a role, or is in
// a group, that r's approvers name. Deciding at all takes the approver
// role besides (see Can).
func (r Rule) Eligible(p Principal) bool {
	for _, a := range r.Approvers {
		if slices.Contains(p.Roles, Role(a)) || slices.Contains(p.Groups, a) {
			return true
		}
	}
	return false
}

// legacyRule decides a request made before requests recorded a policy:
// one person with the approver role.
var legacyRule = Rule{Name: "default", Approvers: []string{string(RoleApprover)}}

// ruleOf is the rule a request is decided by: the one its
// AWAITING_APPROVAL entry records, of the policy it records. The rule is
// found again from the request's bytes, so an entry that records another
// rule than its policy gives it (written into the database to pass for a
// laxer one) decides nothing. Conflict when the recorded policy is not
// the one in force (its rules are not known here), or the rules differ.
func (e *Engine) ruleOf(gated Entry) (Rule, error) {
	hash, name := gated.Field(KeyPolicy), gated.Field(KeyRule)
	if hash == "" {
		return legacyRule, nil
	}
	if hash != e.approvals.Hash {
		return Rule{}, &Error{Kind: Conflict, SagaID: gated.SagaID, Seq: gated.Seq, Msg: fmt.Sprintf(
			"the request at seq=%d was made under approval policy %s, and this server runs policy %s: it is decided by "+
				"the rules it was made under, so a server with that policy must decide it", gated.Seq, short12(hash), short12(e.approvals.Hash))}
	}
	r, ok := e.approvals.Match(gated.ToolName, gated.SagaID, gated.Field(KeyRequester), gated.Input)
	if !ok || r.Name != name {
		return Rule{}, &Error{Kind: Conflict, SagaID: gated.SagaID, Seq: gated.Seq, Msg: fmt.Sprintf(
			"the request at seq=%d records approval rule %q, but its policy gives its bytes %s: nothing is decided on it",
			gated.Seq, name, map[bool]string{true: fmt.Sprintf("rule %q", r.Name), false: "no rule"}[ok])}
	}
	return r, nil
}

func short12(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
