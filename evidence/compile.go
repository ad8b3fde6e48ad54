package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
)

// CompilePolicy compiles spec: every condition must parse, type-check to
// a boolean, and name only payload, tool, saga and requester and the
// context (Context); the claims and time zone must be ones; every
// window must be within bounds (MinWindow at least). Errors name the
// tool, the rule and the field.
func CompilePolicy(spec PolicySpec) (*Approvals, error) { return compilePolicy(spec, false, MinWindow) }

// CompileDevPolicy is CompilePolicy with windows (expires, grant, stepUp,
// an escalation step's after) from MinDevWindow: for a server in dev
// mode, where a first user tries the clocks in seconds. The text and
// hash are what CompilePolicy gives the same rules.
func CompileDevPolicy(spec PolicySpec) (*Approvals, error) {
	return compilePolicy(spec, false, MinDevWindow)
}

// RequireMinWindow is CompilePolicy's refusal of a's rules: nil when every
// window is MinWindow or longer, otherwise an error naming the tool, the
// rule and the first shorter window (a policy CompileDevPolicy compiled,
// or ParsePolicy read, may hold some).
func RequireMinWindow(a *Approvals) error {
	var spec PolicySpec
	if err := json.Unmarshal([]byte(a.Text), &spec); err != nil {
		return err
	}
	_, err := compilePolicy(spec, isLegacy(spec), MinWindow)
	return err
}

// compilePolicy is CompilePolicy; legacy compiles a document from before
// rules said onError, whose conditions skip when they cannot be
// evaluated, as they did when its requests were pinned to it; minWindow
// is the shortest window it accepts.
func compilePolicy(spec PolicySpec, legacy bool, minWindow time.Duration) (*Approvals, error) {
	zone, err := checkContext(spec)
	if err != nil {
		return nil, err
	}
	env, err := conditionEnv(zone.String())
	if err != nil {
		return nil, err
	}
	glass, err := checkBreakGlass(spec.BreakGlass, minWindow)
	if err != nil {
		return nil, err
	}
	canon := PolicySpec{Tools: map[string][]RuleSpec{}, Claims: spec.Claims, TimeZone: spec.TimeZone, BreakGlass: spec.BreakGlass}
	a := &Approvals{tools: map[string][]Rule{}, claims: slices.Clone(spec.Claims), zone: zone, glass: glass}
	// compile compiles the rules of owner (a tool, or "default"), as
	// messages name it (label).
	compile := func(owner, label string, specs []RuleSpec, glass *BreakGlass) ([]RuleSpec, []Rule, error) {
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
			for _, g := range rs.Approvers {
				if err := CheckName("approvers", g); err != nil {
					return nil, nil, fmt.Errorf("%s: %w", where, err)
				}
			}
			quorum, err := checkThresholds(&rs)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", where, err)
			}
			if err := checkWindows(rs, minWindow); err != nil {
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
			steps, err := checkSteps(rs, minWindow)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", where, err)
			}
			r := Rule{Name: rs.Name, When: rs.When, Approvers: slices.Clone(rs.Approvers), Quorum: quorum, Thresholds: cloneThresholds(rs.Thresholds),
				Expires: time.Duration(rs.Expires), Grant: time.Duration(rs.Grant), StepUp: time.Duration(rs.StepUp),
				NotBefore: time.Duration(rs.NotBefore), ReasonRequired: rs.Reason == ReasonRequired, PasskeyRequired: rs.Passkey == PasskeyRequired, Escalate: steps,
				SkipOnError: rs.OnError == OnErrorSkip || (legacy && rs.When != ""), OnApproval: rs.Execute == ExecuteOnApproval, BreakGlass: glass}
			if rs.When != "" {
				ast, iss := env.Compile(rs.When)
				if iss != nil && iss.Err() != nil {
					e := iss.Errors()[0]
					return nil, nil, fmt.Errorf("%s: condition, column %d: %s", where, e.Location.Column()+1, e.Message)
				}
				if ast.OutputType() != cel.BoolType {
					return nil, nil, fmt.Errorf("%s: condition is a %s, not a boolean", where, ast.OutputType())
				}
				a.contextual = a.contextual || readsContext(ast)
				if r.prog, err = env.Program(ast, cel.CostLimit(conditionCost)); err != nil {
					return nil, nil, fmt.Errorf("%s: condition: %w", where, err)
				}
			}
			outSpecs, rules = append(outSpecs, rs), append(rules, r)
		}
		return outSpecs, rules, nil
	}
	if canon.Default, a.fallback, err = compile("default", "default", spec.Default, glass); err != nil {
		return nil, err
	}
	// A policy change is executed by the server once approved: nobody
	// resumes it.
	for i := range spec.PolicyChange {
		switch spec.PolicyChange[i].Execute {
		case "":
			spec.PolicyChange[i].Execute = ExecuteOnApproval
		case ExecuteOnApproval:
		default:
			return nil, fmt.Errorf("policyChange, rule %d: a policy change is executed on approval: leave execute out", i+1)
		}
	}
	// Nobody breaks the glass on a policy change: that would put a policy
	// in force that no quorum approved.
	if canon.PolicyChange, a.change, err = compile(PolicyTool, "policyChange", spec.PolicyChange, nil); err != nil {
		return nil, err
	}
	for _, tool := range slices.Sorted(maps.Keys(spec.Tools)) {
		s, rules, err := compile(tool, "tool "+tool, spec.Tools[tool], glass)
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

// checkThresholds checks the quorum of rs, filling in its defaults (the
// approver role for a rule that names no approvers and has a requirement
// open to any; a quorum of 1), and returns the fewest approvals that
// meet it. A rule's approvers are those it names and its requirements'
// groups, in the order they first appear.
func checkThresholds(rs *RuleSpec) (int, error) {
	if len(rs.Thresholds) == 0 {
		if len(rs.Approvers) == 0 {
			rs.Approvers = []string{string(RoleApprover)}
		}
		if rs.Quorum == 0 {
			rs.Quorum = 1
		}
		if rs.Quorum < 1 || rs.Quorum > MaxQuorum {
			return 0, fmt.Errorf("quorum must be from 1 to %d", MaxQuorum)
		}
		return rs.Quorum, nil
	}
	if rs.Quorum != 0 {
		return 0, fmt.Errorf("a rule has a quorum or thresholds, not both")
	}
	if len(rs.Thresholds) > MaxThresholds {
		return 0, fmt.Errorf("quorum has %d alternatives; at most %d", len(rs.Thresholds), MaxThresholds)
	}
	named := len(rs.Approvers) > 0
	fewest, open := MaxQuorum+1, false
	var froms []string
	for i, alt := range rs.Thresholds {
		where := "quorum"
		if len(rs.Thresholds) > 1 {
			where = fmt.Sprintf("quorum, alternative %d", i+1)
		}
		if len(alt) == 0 || len(alt) > MaxThresholds {
			return 0, fmt.Errorf("%s: an alternative has from 1 to %d requirements (got %d)", where, MaxThresholds, len(alt))
		}
		sum := 0
		seen := map[string]bool{}
		for j, q := range alt {
			switch {
			case q.Count < 1 || q.Count > MaxQuorum:
				return 0, fmt.Errorf("%s, requirement %d: count must be from 1 to %d", where, j+1, MaxQuorum)
			case seen[q.From]:
				return 0, fmt.Errorf("%s, requirement %d: another requirement of the alternative is from %q already: "+
					"give it the sum of their counts", where, j+1, q.From)
			case q.From == "":
				open = true
			default:
				if err := CheckName("from", q.From); err != nil {
					return 0, fmt.Errorf("%s, requirement %d: %w", where, j+1, err)
				}
				if named && !slices.Contains(rs.Approvers, q.From) {
					return 0, fmt.Errorf("%s, requirement %d: %s is none of the rule's approvers (%s)", where, j+1, q.From,
						strings.Join(rs.Approvers, ", "))
				}
				if !slices.Contains(froms, q.From) {
					froms = append(froms, q.From)
				}
			}
			seen[q.From] = true
			sum += q.Count
		}
		if sum > MaxQuorum {
			return 0, fmt.Errorf("%s: asks for %d approvals; at most %d", where, sum, MaxQuorum)
		}
		fewest = min(fewest, sum)
	}
	if !named {
		if open {
			rs.Approvers = []string{string(RoleApprover)}
		}
		for _, g := range froms {
			if !slices.Contains(rs.Approvers, g) {
				rs.Approvers = append(rs.Approvers, g)
			}
		}
	}
	return fewest, nil
}

// checkBreakGlass checks a policy's break-glass (nil for none): at least
// one approver, each a name, and a ratification window from minWindow to
// MaxWindow. It returns the compiled break-glass, nil for none.
func checkBreakGlass(bs *BreakGlassSpec, minWindow time.Duration) (*BreakGlass, error) {
	if bs == nil {
		return nil, nil
	}
	if len(bs.Approvers) == 0 {
		return nil, fmt.Errorf("breakGlass: approvers names nobody: name the roles or groups who may break the glass")
	}
	for _, g := range bs.Approvers {
		if err := CheckName("breakGlass approvers", g); err != nil {
			return nil, fmt.Errorf("breakGlass: %w", err)
		}
	}
	if d := time.Duration(bs.RatifyWithin); d < minWindow || d > MaxWindow {
		return nil, fmt.Errorf("breakGlass: ratifyWithin must be from %s to %s (got %s)", minWindow, MaxWindow, d)
	}
	return &BreakGlass{Approvers: slices.Clone(bs.Approvers), RatifyWithin: time.Duration(bs.RatifyWithin)}, nil
}

// cloneThresholds copies t (nil for none).
func cloneThresholds(t [][]Requirement) [][]Requirement {
	var out [][]Requirement
	for _, alt := range t {
		out = append(out, slices.Clone(alt))
	}
	return out
}

// checkWindows checks a rule's clocks and reason: minWindow or more,
// within bounds, and a reason that is required or not set.
func checkWindows(rs RuleSpec, minWindow time.Duration) error {
	for _, w := range []struct {
		name string
		d    Duration
		max  time.Duration
	}{{"expires", rs.Expires, MaxWindow}, {"grant", rs.Grant, MaxWindow}, {"stepUp", rs.StepUp, MaxStepUp}, {"notBefore", rs.NotBefore, MaxWindow}} {
		if d := time.Duration(w.d); d != 0 && (d < minWindow || d > w.max) {
			return fmt.Errorf("%s must be from %s to %s (got %s)", w.name, minWindow, w.max, d)
		}
	}
	if rs.Grant > 0 && rs.NotBefore >= rs.Grant {
		return fmt.Errorf("notBefore (%s) must be shorter than grant (%s): the request could never be executed", time.Duration(rs.NotBefore), time.Duration(rs.Grant))
	}
	if rs.Reason != "" && rs.Reason != ReasonRequired {
		return fmt.Errorf("reason must be %q or absent (got %q)", ReasonRequired, rs.Reason)
	}
	if rs.Passkey != "" && rs.Passkey != PasskeyRequired {
		return fmt.Errorf("passkey must be %q or absent (got %q)", PasskeyRequired, rs.Passkey)
	}
	if rs.Execute != "" && rs.Execute != ExecuteOnApproval {
		return fmt.Errorf("execute must be %q or absent (got %q)", ExecuteOnApproval, rs.Execute)
	}
	return nil
}

// checkSteps checks a rule's escalation: at most MaxSteps, each later
// than the one before (minWindow or more, and before the request
// expires), each naming endpoints.
func checkSteps(rs RuleSpec, minWindow time.Duration) ([]Step, error) {
	if len(rs.Escalate) > MaxSteps {
		return nil, fmt.Errorf("escalate has %d steps; at most %d", len(rs.Escalate), MaxSteps)
	}
	var steps []Step
	var last time.Duration
	for i, st := range rs.Escalate {
		d := time.Duration(st.After)
		switch {
		case d < minWindow || d > MaxWindow:
			return nil, fmt.Errorf("escalate step %d: after must be from %s to %s (got %s)", i+1, minWindow, MaxWindow, d)
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
// they were made. Its windows may be as short as MinDevWindow, as a
// server in dev mode compiles them.
func ParsePolicy(text string) (*Approvals, error) {
	var spec PolicySpec
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return nil, errorf("not an approval policy document: %v", err)
	}
	a, err := compilePolicy(spec, isLegacy(spec), MinDevWindow)
	if err != nil {
		return nil, errorf("the approval policy document does not compile: %v", err)
	}
	if a.Text != text {
		return nil, errorf("not a canonical approval policy document")
	}
	return a, nil
}

// isLegacy reports whether spec was written before rules said onError:
// none of its rules says it.
func isLegacy(spec PolicySpec) bool {
	for _, rules := range append(slices.Collect(maps.Values(spec.Tools)), spec.Default) {
		for _, rs := range rules {
			if rs.OnError != "" {
				return false
			}
		}
	}
	return true
}
