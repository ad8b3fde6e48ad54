// Package deploy_test checks the compose stack people try Sagacity with:
// the compose file parses, the server's settings in it load as the
// server would load them, and the OpenID provider's realm and the
// server's configuration beside it agree with each other and with the
// README. (Docker is not on the CI machine; cmd/web
// TestComposeQuickStart runs the README's commands against these files.)
package deploy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// compose is the part of the compose file format the file uses; a key
// outside it is a mistake.
type compose struct {
	Name     string `yaml:"name"`
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		NetworkMode string            `yaml:"network_mode"`
		Restart     string            `yaml:"restart"`
		DependsOn   map[string]any    `yaml:"depends_on"`
		Build       map[string]any    `yaml:"build"`
		Healthcheck map[string]any    `yaml:"healthcheck"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// realm is the part of Keycloak's realm representation the realm file
// uses; a field outside it is a mistake.
type realm struct {
	Realm       string `json:"realm"`
	DisplayName string `json:"displayName"`
	Enabled     bool   `json:"enabled"`
	Groups      []struct {
		Name string `json:"name"`
	} `json:"groups"`
	Users   []realmUser `json:"users"`
	Clients []struct {
		ClientID                  string            `json:"clientId"`
		Name                      string            `json:"name"`
		Enabled                   bool              `json:"enabled"`
		Protocol                  string            `json:"protocol"`
		PublicClient              bool              `json:"publicClient"`
		ClientAuthenticatorType   string            `json:"clientAuthenticatorType"`
		Secret                    string            `json:"secret"`
		StandardFlowEnabled       bool              `json:"standardFlowEnabled"`
		DirectAccessGrantsEnabled bool              `json:"directAccessGrantsEnabled"`
		RedirectURIs              []string          `json:"redirectUris"`
		Attributes                map[string]string `json:"attributes"`
		ProtocolMappers           []struct {
			Name, Protocol, ProtocolMapper string
			Config                         map[string]string
		} `json:"protocolMappers"`
	} `json:"clients"`
}

// realmUser is a person of the realm.
type realmUser struct {
	Username, Email, FirstName, LastName string
	EmailVerified, Enabled               bool
	Credentials                          []struct {
		Type, Value string
		Temporary   bool
	}
	Groups []string
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readRealm(t *testing.T) realm {
	t.Helper()
	b, err := os.ReadFile("keycloak-realm.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var r realm
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("keycloak-realm.json: %v", err)
	}
	return r
}

// interpolation is compose's ${NAME:?message}: a variable an earlier
// step must set.
var interpolation = regexp.MustCompile(`^\$\{([A-Z_]+):\?[^}]+\}$`)

// server is the sagacity service's configuration as the server would load
// it, with what earlier steps make (the session key, the signing key's
// file) made up here, and the compose file.
func server(t *testing.T) (config.Config, compose) {
	t.Helper()
	var c compose
	readYAML(t, "compose.yaml", &c)
	for _, name := range []string{"postgres", "keycloak", "sagacity"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("compose.yaml has no service %s", name)
		}
	}
	s := c.Services["sagacity"]
	if _, ok := s.DependsOn["postgres"]; !ok || s.Build["context"] != ".." {
		t.Errorf("sagacity: depends_on %v, build %v; want it built from the repository and started after postgres", s.DependsOn, s.Build)
	}
	skey, _, err := engine.GenerateKeys("compose.test")
	if err != nil {
		t.Fatal(err)
	}
	volume := t.TempDir() // the data volume
	if err := os.WriteFile(filepath.Join(volume, "signing.key"), []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	made := map[string]string{"SAGACITY_SESSION_KEY": strings.Repeat("k", 44)}
	var environ []string
	vars := map[string]string{}
	for k, v := range s.Environment {
		if m := interpolation.FindStringSubmatch(v); m != nil {
			if m[1] != k || made[k] == "" {
				t.Fatalf("%s = %s: the test does not know what to put there", k, v)
			}
			v = made[k]
		} else if strings.Contains(v, "$") {
			t.Fatalf("%s = %s: the test knows only ${%s:?…}", k, v, k)
		}
		vars[k] = v
		environ = append(environ, k+"="+v)
	}
	if err := config.CheckNames(environ); err != nil {
		t.Error(err)
	}
	mounted := map[string]string{} // container path → where it is here
	for _, v := range slices.Concat(s.Volumes, c.Services["keycloak"].Volumes) {
		parts := strings.Split(strings.Fields(v)[0], ":")
		switch {
		case strings.HasPrefix(parts[0], "./"):
			mounted[parts[1]] = parts[0]
		case parts[0] == "data":
			mounted[parts[1]] = volume
		default:
			if _, ok := c.Volumes[parts[0]]; !ok {
				t.Errorf("volume %s is not declared", parts[0])
			}
		}
	}
	for k, v := range vars {
		for in, here := range mounted {
			if rest, ok := strings.CutPrefix(v, in); ok && (rest == "" || rest[0] == '/') {
				vars[k] = here + rest
			}
		}
	}
	cfg, err := config.Load(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatalf("the server would not start: %v", err)
	}
	return cfg, c
}

// TestCompose: the server's settings in the compose file load as the
// server loads them, PostgreSQL listens where the server looks, and
// Keycloak serves the issuer the server trusts.
func TestCompose(t *testing.T) {
	cfg, c := server(t)
	if cfg.Auth != auth.ModeOIDC || !cfg.Demo || len(cfg.File.Roles.Map) == 0 || len(cfg.File.Tokens) == 0 {
		t.Errorf("config: auth %s, demo %v, roles %v, tokens %v; want people signing in through Keycloak, with roles, an agent's token, on the demo",
			cfg.Auth, cfg.Demo, cfg.File.Roles, cfg.File.Tokens)
	}

	db, err := url.Parse(cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	pg := c.Services["postgres"]
	if i := slices.Index(pg.Command, "-p"); i < 0 || pg.Command[i+1] != db.Port() || pg.Environment["POSTGRES_DB"] != strings.TrimPrefix(db.Path, "/") {
		t.Errorf("postgres: command %q, environment %v; SAGACITY_DATABASE_URL expects %s", pg.Command, pg.Environment, db.Redacted())
	}

	// Keycloak's issuer is its hostname and /realms/<realm>; it listens
	// on that address.
	kc := c.Services["keycloak"]
	flags := map[string]string{}
	for _, a := range kc.Command {
		if k, v, ok := strings.Cut(a, "="); ok {
			flags[k] = v
		}
	}
	iss, err := url.Parse(cfg.OIDCIssuer)
	if err != nil {
		t.Fatal(err)
	}
	r := readRealm(t)
	if flags["--hostname"]+"/realms/"+r.Realm != cfg.OIDCIssuer || iss.Host != flags["--http-host"]+":"+flags["--http-port"] ||
		!slices.Contains(kc.Command, "--import-realm") || !slices.Contains(kc.Volumes, "./keycloak-realm.json:/opt/keycloak/data/import/sagacity.json:ro") {
		t.Errorf("keycloak: command %q, volumes %q; want it to import keycloak-realm.json and serve the issuer %s", kc.Command, kc.Volumes, cfg.OIDCIssuer)
	}
}

// TestRealm: Keycloak's realm has the server's client, calling back to
// the server's public URL, with PKCE, and sending the groups claim the
// server maps to roles; the people the README lists sign in with the
// passwords it gives and get the roles it says; the agent's token it
// gives is the one the configuration declares.
func TestRealm(t *testing.T) {
	cfg, _ := server(t)
	r := readRealm(t)
	if len(r.Clients) != 1 {
		t.Fatalf("the realm has %d clients, want the console's", len(r.Clients))
	}
	c := r.Clients[0]
	if !r.Enabled || !c.Enabled || c.ClientID != cfg.OIDCClientID || c.Secret != cfg.OIDCClientSecret || c.PublicClient || !c.StandardFlowEnabled ||
		!slices.Equal(c.RedirectURIs, []string{cfg.PublicURL + auth.CallbackPath}) ||
		c.Attributes["pkce.code.challenge.method"] != "S256" || c.Attributes["post.logout.redirect.uris"] != cfg.PublicURL+"/signed-out" {
		t.Errorf("the realm's client is %+v; want the server's, calling back to %s%s with PKCE", c, cfg.PublicURL, auth.CallbackPath)
	}
	if len(c.ProtocolMappers) != 1 || c.ProtocolMappers[0].ProtocolMapper != "oidc-group-membership-mapper" ||
		c.ProtocolMappers[0].Config["claim.name"] != cfg.File.Roles.Claim || c.ProtocolMappers[0].Config["full.path"] != "false" ||
		c.ProtocolMappers[0].Config["id.token.claim"] != "true" {
		t.Errorf("the client's mappers are %+v; want the groups, by name, in the ID token's %s claim", c.ProtocolMappers, cfg.File.Roles.Claim)
	}

	logins := strings.Split(strings.TrimSpace(testkit.ReadmeBlock(t, "compose logins")), "\n")
	if len(logins) != len(r.Users) {
		t.Errorf("the README lists %d people, the realm has %d", len(logins), len(r.Users))
	}
	roles := map[string]int{}
	for _, l := range logins {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("README login %q is not user, password, role", l)
		}
		i := slices.IndexFunc(r.Users, func(u realmUser) bool { return u.Username == f[0] })
		if i < 0 {
			t.Errorf("README login %s is not in the realm", f[0])
			continue
		}
		u := r.Users[i]
		if !u.Enabled || !u.EmailVerified || u.Email == "" || u.FirstName == "" || u.LastName == "" ||
			len(u.Credentials) != 1 || u.Credentials[0].Type != "password" || u.Credentials[0].Value != f[1] || u.Credentials[0].Temporary {
			t.Errorf("realm user %+v; want enabled, with a verified email, a full name and the password %s for good", u, f[1])
		}
		var got []engine.Role
		for _, g := range u.Groups {
			declared := false
			for _, rg := range r.Groups {
				declared = declared || "/"+rg.Name == g
			}
			if !declared {
				t.Errorf("realm user %s is in %s, which the realm does not declare", u.Username, g)
			}
			got = append(got, cfg.File.Roles.Map[strings.TrimPrefix(g, "/")]...)
		}
		if !slices.Equal(got, []engine.Role{engine.Role(f[2])}) {
			t.Errorf("%s's groups %v give the roles %v, the README says %s", u.Username, u.Groups, got, f[2])
		}
		roles[f[2]]++
	}
	if roles["approver"] < 2 || roles["auditor"] < 1 {
		t.Errorf("the README's people have the roles %v; want two approvers, so that four-eyes can be tried, and an auditor", roles)
	}

	// The agent's token.
	trial := testkit.ReadmeBlock(t, "compose trial")
	m := regexp.MustCompile(`export AGENT_TOKEN=(\S+)`).FindStringSubmatch(trial)
	if m == nil {
		t.Fatalf("the README's trial sets no AGENT_TOKEN:\n%s", trial)
	}
	sum := sha256.Sum256([]byte(m[1]))
	i := slices.IndexFunc(cfg.File.Tokens, func(tk config.Token) bool { return tk.SHA256 == hex.EncodeToString(sum[:]) })
	if i < 0 || !slices.Equal(cfg.File.Tokens[i].Roles, []engine.Role{engine.RoleAgent}) {
		t.Errorf("the README's agent token %s is not declared in sagacity.yaml as an agent's (%+v)", m[1], cfg.File.Tokens)
	}
	if a := cfg.File.Approvals; a == nil || !strings.Contains(a.Text, `"quorum":2`) {
		t.Errorf("the configuration's approval policy asks no two people for anything: %v", a)
	}
}
