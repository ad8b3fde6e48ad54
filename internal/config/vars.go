package config

import (
	"fmt"
	"slices"
	"strings"
)

// Var is one SAGACITY_* environment variable the server reads.
type Var struct {
	Name    string
	Default string // what an unset variable means
	Example string
	Meaning string
}

// Vars are every variable the server reads, in the order help lists them.
var Vars = []Var{
	{"SAGACITY_ADDR", DefaultAddr, "0.0.0.0:8080", "where to listen (host:port)"},
	{"SAGACITY_DATABASE_URL", DefaultDatabaseURL, "postgres://sagacity@db:5432/sagacity", "the store: postgres://… or sqlite:<path>"},
	{"SAGACITY_CONFIG", "none", "/etc/sagacity/sagacity.yaml", "the YAML file of tools, upstreams, tokens, roles, policy and log"},
	{"SAGACITY_AUTH", "dev on loopback without an issuer", "oidc", "who may call: oidc, tokens or dev"},
	{"SAGACITY_PUBLIC_URL", "none (required beyond loopback)", "https://sagacity.example.com", "where people and agents reach the server; its host name is served"},
	{"SAGACITY_ALLOWED_HOSTS", "none", "sagacity.internal,sagacity.svc", "more host names to serve, comma-separated"},
	{"SAGACITY_SIGNING_KEY", "dev: made beside the database", "PRIVATE+KEY+sagacity+…", "the key that signs receipts and checkpoints (sagacity keygen)"},
	{"SAGACITY_SIGNING_KEY_FILE", "none", "/run/secrets/sagacity-signing-key", "a file holding SAGACITY_SIGNING_KEY instead"},
	{"SAGACITY_CHECKPOINT_DIR", "dev: beside the database", "/var/lib/sagacity/checkpoints", "where signed checkpoints are kept, outside the database"},
	{"SAGACITY_TOOL_SIGNING_SECRET", "none (required with HTTP tools)", "a random string of 32 bytes or more", "signs each request to an HTTP tool"},
	{"SAGACITY_OIDC_ISSUER", "none", "https://idp.example.com/realms/main", "the OpenID provider people sign in with"},
	{"SAGACITY_OIDC_CLIENT_ID", "none", "sagacity-console", "the console's client at the provider"},
	{"SAGACITY_OIDC_CLIENT_SECRET", "none: a public client", "…", "the console client's secret, for a confidential client (sign-in uses PKCE either way)"},
	{"SAGACITY_API_AUDIENCE", "none", "sagacity-api", "the audience of the provider's JWTs the API accepts"},
	{"SAGACITY_SESSION_KEY", "random per start (sessions end with the process)", "a random string of 32 bytes or more", "signs console sessions"},
	{"SAGACITY_APPROVAL_ENDPOINTS_ENABLED", "true", "false", "serve approve, reject and resume in the JSON API"},
	{"SAGACITY_DEMO", "false", "true", "built-in demo tools and seeded sagas"},
	{"SAGACITY_LOG_LEVEL", "info", "debug", "the least severe log lines written: debug, info, warn or error"},
}

// CheckNames refuses a SAGACITY_* variable in environ (as os.Environ
// gives it) that the server does not read, naming the closest one it
// does: a misspelled setting is not silently ignored.
func CheckNames(environ []string) error {
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "SAGACITY_") || known(name) {
			continue
		}
		best, dist := "", 0
		for _, v := range Vars {
			if d := distance(name, v.Name); best == "" || d < dist {
				best, dist = v.Name, d
			}
		}
		if dist <= len(name)/3 {
			return fmt.Errorf("%s: not a setting; did you mean %s? (sagacity help lists them all)", name, best)
		}
		return fmt.Errorf("%s: not a setting; unset it (sagacity help lists them all)", name)
	}
	return nil
}

// ClientVars are the variables sagacity hook reads, as an agent's
// client of the server: serve does not read them, and takes a shell that
// sets them.
var ClientVars = []string{"SAGACITY_URL", "SAGACITY_TOKEN"}

func known(name string) bool {
	if slices.Contains(ClientVars, name) {
		return true
	}
	for _, v := range Vars {
		if v.Name == name {
			return true
		}
	}
	return false
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
