// Package deploy_test checks the compose file people try Sagacity with:
// it parses, the server's settings in it load as the server would load
// them, and it agrees with the OpenID provider's configuration beside it.
// (Docker is not on the CI machine, so docker compose config cannot be.)
package deploy_test

import (
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/engine"
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
		DependsOn   map[string]any    `yaml:"depends_on"`
		Build       map[string]any    `yaml:"build"`
		Healthcheck map[string]any    `yaml:"healthcheck"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

type dex struct {
	Issuer  string         `yaml:"issuer"`
	Storage map[string]any `yaml:"storage"`
	OAuth2  map[string]any `yaml:"oauth2"`
	Web     struct {
		HTTP string `yaml:"http"`
	} `yaml:"web"`
	StaticClients []struct {
		ID           string   `yaml:"id"`
		Name         string   `yaml:"name"`
		Secret       string   `yaml:"secret"`
		RedirectURIs []string `yaml:"redirectURIs"`
	} `yaml:"staticClients"`
	Connectors []struct {
		Type, ID, Name string
	} `yaml:"connectors"`
}

func read(t *testing.T, path string, v any) {
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

// interpolation is compose's ${NAME:?message}: a variable the person
// must set.
var interpolation = regexp.MustCompile(`^\$\{([A-Z_]+):\?[^}]+\}$`)

func TestCompose(t *testing.T) {
	var c compose
	read(t, "compose.yaml", &c)
	for _, name := range []string{"postgres", "dex", "sagacity"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("compose.yaml has no service %s", name)
		}
	}
	s := c.Services["sagacity"]
	if _, ok := s.DependsOn["postgres"]; !ok || s.Build["context"] != ".." {
		t.Errorf("sagacity: depends_on %v, build %v; want it built from the repository and started after postgres", s.DependsOn, s.Build)
	}

	// The server's environment, with what the person must set made up
	// here, loads as the server loads it.
	skey, _, err := engine.GenerateKeys("compose.test")
	if err != nil {
		t.Fatal(err)
	}
	made := map[string]string{"SAGACITY_SIGNING_KEY": skey, "SAGACITY_SESSION_KEY": strings.Repeat("k", 44)}
	var environ []string
	vars := map[string]string{}
	for k, v := range s.Environment {
		if m := interpolation.FindStringSubmatch(v); m != nil {
			if m[1] != k || made[k] == "" {
				t.Fatalf("%s = %s: the test does not know what to put there", k, v)
			}
			v = made[k]
		}
		vars[k] = v
		environ = append(environ, k+"="+v)
	}
	if err := config.CheckNames(environ); err != nil {
		t.Error(err)
	}
	mounted := map[string]string{} // container path → file beside this test
	for _, v := range slices.Concat(s.Volumes, c.Services["dex"].Volumes) {
		parts := strings.Split(strings.Fields(v)[0], ":")
		if strings.HasPrefix(parts[0], "./") {
			mounted[parts[1]] = parts[0]
		} else if _, ok := c.Volumes[parts[0]]; !ok {
			t.Errorf("volume %s is not declared", parts[0])
		}
	}
	vars["SAGACITY_CONFIG"] = mounted[vars["SAGACITY_CONFIG"]]
	cfg, err := config.Load(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatalf("the server would not start: %v", err)
	}
	if cfg.Auth != "oidc" || !cfg.Demo || len(cfg.File.Roles.Map) == 0 {
		t.Errorf("config: auth %s, demo %v, roles %v; want people signing in through Dex, with roles, on the demo", cfg.Auth, cfg.Demo, cfg.File.Roles)
	}

	// PostgreSQL listens where the server looks.
	db, err := url.Parse(cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	pg := c.Services["postgres"]
	if i := slices.Index(pg.Command, "-p"); i < 0 || pg.Command[i+1] != db.Port() || pg.Environment["POSTGRES_DB"] != strings.TrimPrefix(db.Path, "/") {
		t.Errorf("postgres: command %q, environment %v; SAGACITY_DATABASE_URL expects %s", pg.Command, pg.Environment, db.Redacted())
	}

	// Dex is the issuer the server trusts, with its client, calling back
	// to the server's public URL.
	var d dex
	read(t, mounted["/etc/dex/config.yaml"], &d)
	if d.Issuer != cfg.OIDCIssuer {
		t.Errorf("dex issuer %s, server's %s", d.Issuer, cfg.OIDCIssuer)
	}
	if iss, _ := url.Parse(d.Issuer); iss.Host != d.Web.HTTP {
		t.Errorf("dex listens on %s, its issuer is %s", d.Web.HTTP, d.Issuer)
	}
	if len(d.StaticClients) != 1 || d.StaticClients[0].ID != cfg.OIDCClientID || d.StaticClients[0].Secret != cfg.OIDCClientSecret ||
		!slices.Contains(d.StaticClients[0].RedirectURIs, cfg.PublicURL+auth.CallbackPath) {
		t.Errorf("dex clients %+v; want the server's client, calling back to %s", d.StaticClients, cfg.PublicURL+auth.CallbackPath)
	}
}
