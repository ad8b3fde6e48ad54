package config

import (
	"fmt"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// yamlApproval is the approval policy. Without default, tools without
// rules of their own go by engine.DefaultPolicy's; default: [] refuses
// their requests.
type yamlApproval struct {
	Default *[]yamlRule           `yaml:"default"`
	Tools   map[string][]yamlRule `yaml:"tools"`
}

type yamlRule struct {
	Name      string   `yaml:"name"`
	When      string   `yaml:"when"`
	Approvers []string `yaml:"approvers"`
	Quorum    int      `yaml:"quorum"`
}

// checkApproval compiles the approval policy; nil, the engine's default,
// without an approval: section.
func checkApproval(y yamlApproval) (*engine.Approvals, error) {
	if y.Default == nil && len(y.Tools) == 0 {
		return nil, nil
	}
	rules := func(ys []yamlRule) []engine.RuleSpec {
		out := []engine.RuleSpec{}
		for _, r := range ys {
			out = append(out, engine.RuleSpec{Name: r.Name, When: r.When, Approvers: r.Approvers, Quorum: r.Quorum})
		}
		return out
	}
	spec := engine.PolicySpec{Default: engine.DefaultPolicy.Default, Tools: map[string][]engine.RuleSpec{}}
	if y.Default != nil {
		spec.Default = rules(*y.Default)
	}
	for tool, rs := range y.Tools {
		spec.Tools[tool] = rules(rs)
	}
	a, err := engine.CompilePolicy(spec)
	if err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	return a, nil
}
