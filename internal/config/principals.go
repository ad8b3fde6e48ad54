package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// Who may call: API tokens and how an OIDC claim maps to roles.

// Token is an API bearer token. Only its hash is configured, so the file
// holds nothing that would let its reader call the API.
type Token struct {
	Name   string        // unique; names the principal
	SHA256 string        // hex SHA-256 of the token, lowercase
	Roles  []engine.Role // at least one
	// Groups make its holder eligible for the approval rules whose
	// approvers name them, as an OIDC user's groups do (none: only its
	// roles can be named).
	Groups []string
}

// Roles maps the values of an OIDC claim to roles.
type Roles struct {
	Claim string                   // the claim holding group names, default "groups"
	Map   map[string][]engine.Role // claim value → roles
}

type yamlToken struct {
	Name   string   `yaml:"name"`
	SHA256 string   `yaml:"sha256"`
	Roles  []string `yaml:"roles"`
	Groups []string `yaml:"groups"`
}

type yamlRoles struct {
	Claim string              `yaml:"claim"`
	Map   map[string][]string `yaml:"map"`
}

func checkTokens(ys []yamlToken) ([]Token, error) {
	var tokens []Token
	names, hashes := map[string]int{}, map[string]int{}
	for i, y := range ys {
		where := fmt.Sprintf("tokens[%d]", i)
		if err := checkName(y.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		where += fmt.Sprintf(" %q", y.Name)
		if j, dup := names[y.Name]; dup {
			return nil, fmt.Errorf("%s: name is already used by tokens[%d]", where, j)
		}
		names[y.Name] = i
		// The value is not repeated: it may be a token pasted in by mistake.
		h := strings.ToLower(y.SHA256)
		switch {
		case h == "":
			return nil, fmt.Errorf("%s: sha256 is missing", where)
		case !isHex(h, 64):
			return nil, fmt.Errorf("%s: sha256 must be 64 hex characters, the SHA-256 of the token (not the token itself)", where)
		}
		if j, dup := hashes[h]; dup {
			return nil, fmt.Errorf("%s: sha256 is the same as tokens[%d] %q's", where, j, ys[j].Name)
		}
		hashes[h] = i
		roles, err := engine.ParseRoles(y.Roles)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		groups, err := checkGroups(y.Groups)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		tokens = append(tokens, Token{Name: y.Name, SHA256: h, Roles: roles, Groups: groups})
	}
	return tokens, nil
}

func checkRoles(y yamlRoles) (Roles, error) {
	r := Roles{Claim: or(y.Claim, defaultClaim)}
	if y.Map == nil {
		return r, nil
	}
	r.Map = make(map[string][]engine.Role, len(y.Map))
	// Sorted, so that the same file always reports the same problem.
	for _, k := range slices.Sorted(maps.Keys(y.Map)) {
		if k == "" {
			return Roles{}, errors.New(`roles.map: a claim value is empty`)
		}
		roles, err := engine.ParseRoles(y.Map[k])
		if err != nil {
			return Roles{}, fmt.Errorf("roles.map[%q]: %w", k, err)
		}
		r.Map[k] = roles
	}
	return r, nil
}

// checkGroups checks a token's groups as a rule's approvers are checked,
// so that a rule can name each; each once.
func checkGroups(ys []string) ([]string, error) {
	for i, g := range ys {
		if err := checkName(g); err != nil {
			return nil, fmt.Errorf("groups[%d]: %w", i, err)
		}
		if slices.Contains(ys[:i], g) {
			return nil, fmt.Errorf("groups: %q is listed twice", g)
		}
	}
	return ys, nil
}
