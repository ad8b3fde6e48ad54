package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// yamlQuorum is a rule's quorum as the file writes it: a number of the
// rule's approvers (quorum: 2); a list of requirements that must all be
// met (quorum: [{from: finance, count: 1}, {from: security, count: 1}]);
// or alternatives, any of which meets the rule, each a number or such a
// list (quorum: {anyOf: [2, [{from: treasury, count: 1}]]}).
type yamlQuorum struct {
	count      int
	thresholds [][]engine.Requirement
}

// quorumForms says what a quorum may be, for errors.
const quorumForms = "quorum is a number, a list of requirements such as [{from: finance, count: 1}], or {anyOf: [...]} of those"

// UnmarshalYAML reads any of the forms.
func (q *yamlQuorum) UnmarshalYAML(n *yaml.Node) error {
	bad := func(n *yaml.Node, why string) error { return fmt.Errorf("line %d: %s (%s)", n.Line, why, quorumForms) }
	switch n.Kind {
	case yaml.ScalarNode:
		if err := n.Decode(&q.count); err != nil {
			return bad(n, fmt.Sprintf("%q is not a number", n.Value))
		}
		return nil
	case yaml.SequenceNode:
		alt, err := requirements(n)
		if err != nil {
			return err
		}
		q.thresholds = [][]engine.Requirement{alt}
		return nil
	case yaml.MappingNode:
		if len(n.Content) != 2 || n.Content[0].Value != "anyOf" || n.Content[1].Kind != yaml.SequenceNode {
			return bad(n, "a quorum that is a map has one key, anyOf, a list of alternatives")
		}
		for _, a := range n.Content[1].Content {
			var one yamlQuorum
			if a.Kind == yaml.MappingNode {
				return bad(a, "an alternative is a number or a list of requirements")
			}
			if err := one.UnmarshalYAML(a); err != nil {
				return err
			}
			if one.thresholds == nil {
				one.thresholds = [][]engine.Requirement{{{Count: one.count}}}
			}
			q.thresholds = append(q.thresholds, one.thresholds...)
		}
		if len(q.thresholds) == 0 {
			return bad(n, "anyOf lists no alternative")
		}
		return nil
	}
	return bad(n, "not a quorum")
}

// requirements reads a list of requirements, each {from, count}.
func requirements(n *yaml.Node) ([]engine.Requirement, error) {
	var out []engine.Requirement
	for _, r := range n.Content {
		if r.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("line %d: a requirement is {from: <group or role>, count: <n>} (%s)", r.Line, quorumForms)
		}
		var q engine.Requirement
		counted := false
		for i := 0; i+1 < len(r.Content); i += 2 {
			k, v := r.Content[i], r.Content[i+1]
			var err error
			switch k.Value {
			case "from":
				err = v.Decode(&q.From)
			case "count":
				err, counted = v.Decode(&q.Count), true
			default:
				return nil, fmt.Errorf("line %d: a requirement has from and count, not %s", k.Line, k.Value)
			}
			if err != nil || v.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: %s: %q is not a %s", v.Line, k.Value, v.Value, map[string]string{"from": "name", "count": "number"}[k.Value])
			}
		}
		if !counted {
			return nil, fmt.Errorf("line %d: a requirement says how many: count", r.Line)
		}
		out = append(out, q)
	}
	return out, nil
}
