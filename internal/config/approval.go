package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// yamlApproval is the approval policy. Without default, tools without
// rules of their own go by engine.DefaultPolicy's, provided none of them
// is IRREVERSIBLE (checkApproval); default: [] refuses their requests.
type yamlApproval struct {
	Default *[]yamlRule           `yaml:"default"`
	Tools   map[string][]yamlRule `yaml:"tools"`
	// PolicyChange are the rules a change of this policy needs
	// (engine.PolicySpec.PolicyChange).
	PolicyChange []yamlRule `yaml:"policyChange"`
	// Claims name the claims of a requester's token its conditions see
	// (who.claims); TimeZone is the zone they read the time in (tz).
	Claims   []string `yaml:"claims"`
	TimeZone string   `yaml:"timeZone"`
	// BreakGlass names who may execute a request without its quorum, and
	// how long its rule's quorum has to ratify that
	// (engine.PolicySpec.BreakGlass); off when absent.
	BreakGlass *yamlBreakGlass `yaml:"breakGlass"`
}

// yamlBreakGlass is the policy's break-glass.
type yamlBreakGlass struct {
	Approvers    []string `yaml:"approvers"`
	RatifyWithin string   `yaml:"ratifyWithin"`
}

type yamlRule struct {
	Name      string     `yaml:"name"`
	When      string     `yaml:"when"`
	OnError   string     `yaml:"onError"`
	Approvers []string   `yaml:"approvers"`
	Quorum    yamlQuorum `yaml:"quorum"`
	Expires   string     `yaml:"expires"`
	Grant     string     `yaml:"grant"`
	NotBefore string     `yaml:"notBefore"`
	Reason    string     `yaml:"reason"`
	StepUp    string     `yaml:"stepUp"`
	Passkey   string     `yaml:"passkey"`
	// Execute is on-approval when the server executes an approved
	// request itself (engine.ExecuteOnApproval).
	Execute string `yaml:"execute"`
	// Escalate are the steps that widen who is told of a request still
	// short of its quorum (engine.StepSpec).
	Escalate []yamlStep `yaml:"escalate"`
}

// yamlStep is a step of a rule's escalation: after how long, which
// endpoints of notifications: it tells too.
type yamlStep struct {
	After  string   `yaml:"after"`
	Notify []string `yaml:"notify"`
}

// checkApproval compiles the approval policy, with windows down to
// engine.MinDevWindow (Config.Load refuses shorter than engine.MinWindow
// outside dev mode); nil, the engine's default, without an approval:
// section. A section without default: is refused while one of gated (the
// IRREVERSIBLE tools the server serves) has no rules of its own: a first
// user reads "fail closed" and would not expect them to go by one
// approver unasked.
func checkApproval(y yamlApproval, gated []string) (*engine.Approvals, error) {
	if y.Default == nil && len(y.Tools) == 0 && len(y.PolicyChange) == 0 {
		if len(y.Claims) > 0 || y.TimeZone != "" {
			return nil, fmt.Errorf("approval: claims: and timeZone: are for rules' conditions, and the section has no rules (default: or tools:)")
		}
		if y.BreakGlass != nil {
			return nil, fmt.Errorf("approval: breakGlass: bypasses rules' quorums, and the section has no rules (default: or tools:)")
		}
		return nil, nil
	}
	if y.Default == nil {
		var bare []string
		for _, name := range gated {
			if _, ok := y.Tools[name]; !ok {
				bare = append(bare, name)
			}
		}
		if len(bare) > 0 {
			return nil, fmt.Errorf("approval: default: is missing, and these IRREVERSIBLE tools have no rules of their own: %s; "+
				"say what their requests need: default: [{name: default}] (one approver, as without an approval: section) "+
				"or default: [] (refuse them)", strings.Join(bare, ", "))
		}
	}
	rules := func(label string, ys []yamlRule) ([]engine.RuleSpec, error) {
		out := []engine.RuleSpec{}
		for i, r := range ys {
			rs := engine.RuleSpec{Name: r.Name, When: r.When, OnError: r.OnError, Approvers: r.Approvers, Quorum: r.Quorum.count,
				Thresholds: r.Quorum.thresholds, Reason: r.Reason, Passkey: r.Passkey,
				Execute: r.Execute}
			for _, d := range []struct {
				key, v string
				to     *engine.Duration
			}{{"expires", r.Expires, &rs.Expires}, {"grant", r.Grant, &rs.Grant}, {"stepUp", r.StepUp, &rs.StepUp},
				{"notBefore", r.NotBefore, &rs.NotBefore}} {
				if d.v == "" {
					continue
				}
				v, err := time.ParseDuration(d.v)
				if err != nil {
					return nil, fmt.Errorf("approval: %s, rule %d: %s: %q is not a duration like 30m or 2h", label, i+1, d.key, d.v)
				}
				*d.to = engine.Duration(v)
			}
			for j, st := range r.Escalate {
				v, err := time.ParseDuration(st.After)
				if err != nil {
					return nil, fmt.Errorf("approval: %s, rule %d: escalate step %d: after: %q is not a duration like 30m or 2h", label, i+1, j+1, st.After)
				}
				rs.Escalate = append(rs.Escalate, engine.StepSpec{After: engine.Duration(v), Notify: st.Notify})
			}
			out = append(out, rs)
		}
		return out, nil
	}
	spec := engine.PolicySpec{Default: engine.DefaultPolicy.Default, Tools: map[string][]engine.RuleSpec{}, Claims: y.Claims, TimeZone: y.TimeZone}
	var err error
	if y.Default != nil {
		if spec.Default, err = rules("default", *y.Default); err != nil {
			return nil, err
		}
	}
	for tool, rs := range y.Tools {
		if spec.Tools[tool], err = rules("tool "+tool, rs); err != nil {
			return nil, err
		}
	}
	if spec.PolicyChange, err = rules("policyChange", y.PolicyChange); err != nil {
		return nil, err
	}
	if g := y.BreakGlass; g != nil {
		within, err := time.ParseDuration(g.RatifyWithin)
		if err != nil {
			return nil, fmt.Errorf("approval: breakGlass: ratifyWithin: %q is not a duration like 30m or 24h (how long the rule's quorum has to ratify a use)", g.RatifyWithin)
		}
		spec.BreakGlass = &engine.BreakGlassSpec{Approvers: g.Approvers, RatifyWithin: engine.Duration(within)}
	}
	a, err := engine.CompileDevPolicy(spec)
	if err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	return a, nil
}

// gatedTools names the IRREVERSIBLE tools the server serves: the file's,
// its upstreams' (with every tool an upstream whose default is
// IRREVERSIBLE lists later, which no rule can name yet) and the demo's.
func gatedTools(tools []Tool, ups []Upstream, demoTools []engine.Tool) []string {
	var gated []string
	for _, t := range tools {
		if t.Reversibility == engine.Irreversible {
			gated = append(gated, t.Name)
		}
	}
	for _, u := range ups {
		for _, name := range slices.Sorted(maps.Keys(u.Tools)) {
			if r, _ := u.Resolve(name); r == engine.Irreversible {
				gated = append(gated, u.Prefix+name)
			}
		}
		if u.Default == engine.Irreversible {
			gated = append(gated, fmt.Sprintf("every tool of upstream %q its tools: does not name (its default is IRREVERSIBLE)", u.Name))
		}
	}
	for _, t := range demoTools {
		if t.Reversibility == engine.Irreversible {
			gated = append(gated, t.Name)
		}
	}
	return gated
}
