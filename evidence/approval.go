package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
)

// An approval policy says who must approve a request of an IRREVERSIBLE
// tool, how many of them, and until when: per tool and as a default, an
// ordered list of rules, the first whose condition holds for the exact
// request applying. A condition that cannot be evaluated for a request
// refuses it, unless its rule says onError: skip: otherwise the requester
// would pick its own rule, by sending what makes a stricter rule's
// condition fail. It is compiled once, at start-up; a policy that does
// not compile is refused, naming the tool, the rule and the column.

// RuleSpec is one rule as the configuration writes it.
type RuleSpec struct {
	// Name names the rule in journals and receipts; "<tool>#<n>" (or
	// "default#<n>") when empty, n counting from 1.
	Name string `json:"name,omitempty"`
	// When is a CEL condition over payload (the input parsed as a JSON
	// object), tool, saga and requester; empty, the rule always applies.
	When string `json:"when,omitempty"`
	// OnError says what a condition that cannot be evaluated for a
	// request (an error, a cost over the bound, input that is no JSON
	// object) does: OnErrorRefuse, the gate refuses the request;
	// OnErrorSkip, the rule does not apply and the next one is tried.
	// OnErrorRefuse when empty; the canonical document says it for
	// every rule with a condition.
	OnError string `json:"onError,omitempty"`
	// Approvers are the roles or groups whose members may vote; the
	// approver role when empty.
	Approvers []string `json:"approvers,omitempty"`
	// Quorum is how many distinct people must approve; 1 when 0.
	Quorum int `json:"quorum,omitempty"`
	// Expires is how long a request may wait for its quorum before the
	// server rejects it; never when 0.
	Expires Duration `json:"expires,omitempty"`
	// Grant is how long after its quorum a request may still be
	// executed; without end when 0.
	Grant Duration `json:"grant,omitempty"`
	// Reason is ReasonRequired when every vote must say why; "" when a
	// reason is optional.
	Reason string `json:"reason,omitempty"`
	// StepUp is how recent a voter's sign-in must be for the vote to
	// count; any sign-in when 0.
	StepUp Duration `json:"stepUp,omitempty"`
	// Passkey is PasskeyRequired when a vote counts only signed by the
	// voter's own passkey, over the ballot; "" when the server's receipt
	// is enough.
	Passkey string `json:"passkey,omitempty"`
	// Escalate are the steps that widen who is told of a request still
	// short of its quorum: never who may vote.
	Escalate []StepSpec `json:"escalate,omitempty"`
}

// StepSpec is a step of a rule's escalation: After this long short of
// its quorum, the request is also told to the Notify endpoints.
type StepSpec struct {
	After  Duration `json:"after"`
	Notify []string `json:"notify"`
}

// MaxSteps bounds a rule's escalation.
const MaxSteps = 10

// PasskeyRequired is RuleSpec.Passkey for a rule whose votes the voter's
// passkey must sign.
const PasskeyRequired = "required"

// ReasonRequired is RuleSpec.Reason for a rule whose votes must say why.
const ReasonRequired = "required"

// RuleSpec.OnError's values.
const (
	// OnErrorRefuse: a condition that cannot be evaluated refuses the
	// request at the gate, as no rule applying does.
	OnErrorRefuse = "refuse"
	// OnErrorSkip: a condition that cannot be evaluated does not hold,
	// and the next rule is tried.
	OnErrorSkip = "skip"
)

// Duration is a length of time as a policy writes it: "30m", "2h",
// "168h". Its JSON is Go's duration text.
type Duration time.Duration

// MarshalJSON writes d as Go's duration text ("1h30m0s").
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// UnmarshalJSON reads Go's duration text.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("a duration is a string such as \"30m\"")
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// PolicySpec is the approval policy as the configuration writes it.
type PolicySpec struct {
	Default []RuleSpec            `json:"default,omitempty"`
	Tools   map[string][]RuleSpec `json:"tools,omitempty"`
}

// Rule is a compiled rule.
type Rule struct {
	Name string
	// When is the condition as written, for people ("" for none).
	When      string
	Approvers []string
	Quorum    int
	// Expires, Grant and StepUp are 0 when the rule sets none.
	Expires, Grant, StepUp time.Duration
	ReasonRequired         bool
	// PasskeyRequired: a vote counts only with an assertion of the
	// voter's enrolled passkey over its ballot.
	PasskeyRequired bool
	// Escalate are its escalation's steps, in order.
	Escalate []Step
	// SkipOnError: a condition that cannot be evaluated does not hold
	// (onError: skip); otherwise it refuses the request.
	SkipOnError bool
	prog        cel.Program // nil without a condition
}

// Step is a step of a rule's escalation: After this long since the
// request was made, short of its quorum, Notify are told too.
type Step struct {
	After  time.Duration
	Notify []string
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

// Bounds on what a rule may ask.
const (
	// MaxQuorum is the largest quorum a rule may ask for.
	MaxQuorum = 50
	// MinWindow is the shortest expiry, grant or step-up window.
	MinWindow = time.Minute
	// MaxWindow is the longest expiry or grant window.
	MaxWindow = 366 * 24 * time.Hour
	// MaxStepUp is the longest step-up window: no sign-in lasts longer.
	MaxStepUp = 12 * time.Hour
)

// conditionCost bounds what evaluating one condition may cost (CEL's
// cost units, roughly one per value visited).
const conditionCost = 100_000

// DefaultPolicy is the policy without configuration: one approver
// approves any request.
var DefaultPolicy = PolicySpec{Default: []RuleSpec{{Name: "default", Approvers: []string{string(RoleApprover)}, Quorum: 1}}}

// CompilePolicy compiles spec: every condition must parse, type-check to
// a boolean, and name only payload, tool, saga and requester; every
// window must be within bounds. Errors name the tool, the rule and the
// field.
func CompilePolicy(spec PolicySpec) (*Approvals, error) { return compilePolicy(spec, false) }

// compilePolicy is CompilePolicy; legacy compiles a document from before
// rules said onError, whose conditions skip when they cannot be
// evaluated, as they did when its requests were pinned to it.
func compilePolicy(spec PolicySpec, legacy bool) (*Approvals, error) {
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
			if err := CheckName("rule name", rs.Name); err != nil || strings.ContainsAny(rs.Name, " \n") {
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
			if rs.Quorum < 1 || rs.Quorum > MaxQuorum {
				return nil, nil, fmt.Errorf("%s: quorum must be from 1 to %d", where, MaxQuorum)
			}
			for _, g := range rs.Approvers {
				if err := CheckName("approvers", g); err != nil {
					return nil, nil, fmt.Errorf("%s: %w", where, err)
				}
			}
			if err := checkWindows(rs); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", where, err)
			}
			switch {
			case rs.When == "" && rs.OnError != "":
				return nil, nil, fmt.Errorf("%s: onError applies to a rule with a condition (when)", where)
			case rs.When != "" && rs.OnError == "" && !legacy:
				rs.OnError = OnErrorRefuse
			case rs.OnError != "" && rs.OnError != OnErrorRefuse && rs.OnError != OnErrorSkip:
				return nil, nil, fmt.Errorf("%s: onError must be %q or %q (got %q)", where, OnErrorRefuse, OnErrorSkip, rs.OnError)
			}
			steps, err := checkSteps(rs)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", where, err)
			}
			r := Rule{Name: rs.Name, When: rs.When, Approvers: slices.Clone(rs.Approvers), Quorum: rs.Quorum,
				Expires: time.Duration(rs.Expires), Grant: time.Duration(rs.Grant), StepUp: time.Duration(rs.StepUp),
				ReasonRequired: rs.Reason == ReasonRequired, PasskeyRequired: rs.Passkey == PasskeyRequired, Escalate: steps,
				SkipOnError: rs.OnError == OnErrorSkip || (legacy && rs.When != "")}
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

// checkWindows checks a rule's clocks and reason: whole minutes or more,
// within bounds, and a reason that is required or not set.
func checkWindows(rs RuleSpec) error {
	for _, w := range []struct {
		name string
		d    Duration
		max  time.Duration
	}{{"expires", rs.Expires, MaxWindow}, {"grant", rs.Grant, MaxWindow}, {"stepUp", rs.StepUp, MaxStepUp}} {
		if d := time.Duration(w.d); d != 0 && (d < MinWindow || d > w.max) {
			return fmt.Errorf("%s must be from %s to %s (got %s)", w.name, MinWindow, w.max, d)
		}
	}
	if rs.Reason != "" && rs.Reason != ReasonRequired {
		return fmt.Errorf("reason must be %q or absent (got %q)", ReasonRequired, rs.Reason)
	}
	if rs.Passkey != "" && rs.Passkey != PasskeyRequired {
		return fmt.Errorf("passkey must be %q or absent (got %q)", PasskeyRequired, rs.Passkey)
	}
	return nil
}

// checkSteps checks a rule's escalation: at most MaxSteps, each later
// than the one before (whole minutes or more, and before the request
// expires), each naming endpoints.
func checkSteps(rs RuleSpec) ([]Step, error) {
	if len(rs.Escalate) > MaxSteps {
		return nil, fmt.Errorf("escalate has %d steps; at most %d", len(rs.Escalate), MaxSteps)
	}
	var steps []Step
	var last time.Duration
	for i, st := range rs.Escalate {
		d := time.Duration(st.After)
		switch {
		case d < MinWindow || d > MaxWindow:
			return nil, fmt.Errorf("escalate step %d: after must be from %s to %s (got %s)", i+1, MinWindow, MaxWindow, d)
		case d <= last:
			return nil, fmt.Errorf("escalate step %d: after (%s) must be later than the step before (%s)", i+1, d, last)
		case rs.Expires > 0 && d >= time.Duration(rs.Expires):
			return nil, fmt.Errorf("escalate step %d: after (%s) must come before the request expires (%s)", i+1, d, time.Duration(rs.Expires))
		case len(st.Notify) == 0:
			return nil, fmt.Errorf("escalate step %d: notify names no endpoint", i+1)
		}
		for _, n := range st.Notify {
			if err := CheckName("escalate notify", n); err != nil {
				return nil, fmt.Errorf("escalate step %d: %w", i+1, err)
			}
		}
		last = d
		steps = append(steps, Step{After: d, Notify: slices.Clone(st.Notify)})
	}
	return steps, nil
}

// ParsePolicy compiles a canonical policy document (Approvals.Text),
// as the global log keeps it. An *Error when it is not one: other bytes
// than CompilePolicy would write for the rules it holds. A document in
// which no rule says onError was written before rules did: its
// conditions skip when they cannot be evaluated, as they did when it was
// in force, so the requests pinned to it are decided, and verify, as
// they were made.
func ParsePolicy(text string) (*Approvals, error) {
	var spec PolicySpec
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return nil, errorf("not an approval policy document: %v", err)
	}
	legacy := true
	for _, rules := range append(slices.Collect(maps.Values(spec.Tools)), spec.Default) {
		for _, rs := range rules {
			legacy = legacy && rs.OnError == ""
		}
	}
	a, err := compilePolicy(spec, legacy)
	if err != nil {
		return nil, errorf("the approval policy document does not compile: %v", err)
	}
	if a.Text != text {
		return nil, errorf("not a canonical approval policy document")
	}
	return a, nil
}

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
func (a *Approvals) Match(tool, saga, requester, input string) Matched {
	var payload map[string]any
	object := json.Unmarshal([]byte(input), &payload) == nil && payload != nil
	vars := map[string]any{"payload": payload, "tool": tool, "saga": saga, "requester": requester}
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

// Recorded finds the rule a policy gives the bytes of a request (its
// AWAITING_APPROVAL entry gated), which must be the one the entry
// records: an entry that records another (written into the database to
// pass for a laxer rule) decides nothing. An *Error otherwise.
func (a *Approvals) Recorded(gated Entry) (Rule, error) {
	name := gated.Field(KeyRule)
	m := a.Match(gated.ToolName, gated.SagaID, gated.Field(KeyRequester), gated.Input)
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
// the tool's own, or the default's.
func (a *Approvals) Rules(tool string) []Rule {
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
	}
}
