package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sagacity-go/sagacity/internal/auth/authtest"
	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// The stand-in for docker. It does what the README's commands need of
// docker build, docker run and docker compose, by the rules docker and
// compose document
// (https://docs.docker.com/compose/how-tos/environment-variables/variable-interpolation/):
// the compose file's values are interpolated for every command, from the
// environment and then the project directory's .env, and ${X:?message}
// fails when X is unset or empty; a named volume is a directory the
// containers share, a bind mount a file of the project that must exist;
// docker run's environment is the Dockerfile's ENV under what -e sets,
// compose's the service's environment (which sets all the image's ENV
// does, and more). It runs the sagacity image's commands with this
// checkout's run; in place of serving, it checks that every file the
// server is told to read exists and that its settings load, and writes
// the server's environment to $DOCKER_STAND_IN/sagacity.env. Its state
// (the named volumes, the built image's context) is under
// $DOCKER_STAND_IN.

// standInService is the part of a compose service the stand-in reads.
type standInService struct {
	Build       map[string]any    `yaml:"build"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
}

// dockerStandIn is docker's main when the test binary runs as docker.
func dockerStandIn(args []string, stdout, stderr io.Writer) int {
	if err := standIn(args, stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func standIn(args []string, stdout io.Writer) error {
	state := os.Getenv("DOCKER_STAND_IN")
	if state == "" {
		return errors.New("DOCKER_STAND_IN is not set")
	}
	if len(args) == 0 {
		return errors.New("docker: no command")
	}
	switch args[0] {
	case "build":
		return dockerBuild(args[1:], state, stdout)
	case "run":
		return dockerRun(args[1:], state, stdout)
	case "compose":
	default:
		return fmt.Errorf("docker %s: the stand-in does not know it", args[0])
	}
	if len(args) < 2 {
		return errors.New("docker compose: no command")
	}
	sub, args := args[1], args[2:]
	services, volumes, err := loadCompose(".")
	if err != nil {
		return err
	}
	switch sub {
	case "build", "down":
		fmt.Fprintf(stdout, "stand-in: docker compose %s\n", sub)
		return nil
	case "run":
		for len(args) > 0 && strings.HasPrefix(args[0], "-") {
			if args[0] != "--rm" && args[0] != "--no-deps" {
				return fmt.Errorf("docker compose run: the stand-in does not know %s", args[0])
			}
			args = args[1:]
		}
		if len(args) == 0 {
			return errors.New("docker compose run: no service")
		}
		s, ok := services[args[0]]
		if !ok || s.Build == nil {
			return fmt.Errorf("docker compose run %s: the stand-in runs the image built from this repository alone", args[0])
		}
		m, err := mounts(s, volumes, state)
		if err != nil {
			return err
		}
		return container(args[1:], s.Environment, m, state, stdout)
	case "up":
		for name, s := range services {
			if _, err := mounts(s, volumes, state); err != nil {
				return fmt.Errorf("service %s: %w", name, err)
			}
		}
		s, ok := services["sagacity"]
		if !ok {
			return errors.New("no service sagacity")
		}
		m, _ := mounts(s, volumes, state)
		fmt.Fprintln(stdout, "stand-in: postgres and keycloak would start")
		return container(nil, s.Environment, m, state, stdout)
	}
	return fmt.Errorf("docker compose %s: the stand-in does not know it", sub)
}

// dockerBuild takes note of the context the image is built from.
func dockerBuild(args []string, state string, stdout io.Writer) error {
	var tag string
	for len(args) > 1 {
		switch args[0] {
		case "-t", "--build-arg":
			if args[0] == "-t" {
				tag = args[1]
			}
			args = args[2:]
		default:
			return fmt.Errorf("docker build: the stand-in does not know %s", args[0])
		}
	}
	if tag != "sagacity" || len(args) != 1 {
		return fmt.Errorf("docker build: want -t sagacity and one context")
	}
	ctx, err := filepath.Abs(args[0])
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(ctx, "Dockerfile")); err != nil {
		return fmt.Errorf("docker build: %w", err)
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stand-in: built sagacity from %s\n", ctx)
	return os.WriteFile(filepath.Join(state, "image"), []byte(ctx), 0o644)
}

// dockerRun runs a container of the image docker build made.
func dockerRun(args []string, state string, stdout io.Writer) error {
	env := map[string]string{}
	var vols []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch {
		case args[0] == "--rm":
			args = args[1:]
		case len(args) > 1 && (args[0] == "-v" || args[0] == "-e" || args[0] == "-p"):
			switch args[0] {
			case "-v":
				vols = append(vols, args[1])
			case "-e":
				k, v, _ := strings.Cut(args[1], "=")
				env[k] = v
			}
			args = args[2:]
		default:
			return fmt.Errorf("docker run: the stand-in does not know %s", args[0])
		}
	}
	ctx, err := os.ReadFile(filepath.Join(state, "image"))
	if err != nil || len(args) == 0 || args[0] != "sagacity" {
		return fmt.Errorf("docker run: no image sagacity was built (%w)", err)
	}
	dockerfile, err := os.ReadFile(filepath.Join(string(ctx), "Dockerfile"))
	if err != nil {
		return err
	}
	// The image's ENV, under what -e sets.
	for f := range strings.FieldsSeq(regexp.MustCompile(`(?m)^ENV ((?:.*\\\n)*.*)$`).FindStringSubmatch(string(dockerfile))[1]) {
		if k, v, ok := strings.Cut(f, "="); ok {
			if _, set := env[k]; !set {
				env[k] = v
			}
		}
	}
	named := map[string]any{}
	for _, v := range vols {
		named[strings.Split(v, ":")[0]] = nil // docker run makes a named volume it is given
	}
	m, err := mounts(standInService{Volumes: vols}, named, state)
	if err != nil {
		return err
	}
	return container(args[1:], env, m, state, stdout)
}

// container runs the image's command args (serve when there are none)
// with env, its paths mapped by m. In place of serving, it checks what
// the server would read and writes its environment to state/sagacity.env.
func container(args []string, env map[string]string, m func(string) string, state string, stdout io.Writer) error {
	vars := map[string]string{}
	for k, v := range env {
		vars[k] = m(v)
	}
	if len(args) > 0 && args[0] != "serve" {
		var environ []string
		for k, v := range vars {
			environ = append(environ, k+"="+v)
		}
		cmd := slices.Clone(args)
		for i, a := range cmd {
			cmd[i] = m(a)
		}
		return run(context.Background(), cmd, environ, stdout)
	}
	var lines []string
	for k, v := range vars {
		lines = append(lines, k+"="+v)
		if strings.HasSuffix(k, "_FILE") {
			if _, err := os.Stat(v); err != nil {
				return fmt.Errorf("sagacity: %s names %s, which no earlier command made: %w", k, env[k], err)
			}
		}
	}
	if _, err := config.Load(func(k string) string { return vars[k] }); err != nil {
		return fmt.Errorf("sagacity would not start: %w", err)
	}
	slices.Sort(lines)
	fmt.Fprintln(stdout, "stand-in: sagacity would start")
	return os.WriteFile(filepath.Join(state, "sagacity.env"), []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

// loadCompose reads dir's compose.yaml, interpolated with the
// environment and dir's .env, and returns its services and volumes.
func loadCompose(dir string) (map[string]standInService, map[string]any, error) {
	b, err := os.ReadFile(filepath.Join(dir, "compose.yaml"))
	if err != nil {
		return nil, nil, err
	}
	dotenv, err := readDotEnv(filepath.Join(dir, ".env"))
	if err != nil {
		return nil, nil, err
	}
	lookup := func(k string) (string, bool) {
		if v, ok := os.LookupEnv(k); ok {
			return v, true // the environment wins over .env
		}
		v, ok := dotenv[k]
		return v, ok
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, nil, err
	}
	if err := interpolateNode(&doc, "", lookup); err != nil {
		return nil, nil, err
	}
	var f struct {
		Services map[string]standInService `yaml:"services"`
		Volumes  map[string]any            `yaml:"volumes"`
	}
	if err := doc.Decode(&f); err != nil {
		return nil, nil, err
	}
	return f.Services, f.Volumes, nil
}

// interpolateNode interpolates every value (not key) under n; path names
// where, as compose's errors do.
func interpolateNode(n *yaml.Node, path string, lookup func(string) (string, bool)) error {
	switch n.Kind {
	case yaml.ScalarNode:
		v, err := interpolate(n.Value, lookup)
		if err != nil {
			return fmt.Errorf("error while interpolating %s: %w", path, err)
		}
		n.Value = v
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := interpolateNode(n.Content[i+1], strings.TrimPrefix(path+"."+n.Content[i].Value, "."), lookup); err != nil {
				return err
			}
		}
	default:
		for i, c := range n.Content {
			p := path
			if n.Kind == yaml.SequenceNode {
				p = fmt.Sprintf("%s[%d]", path, i)
			}
			if err := interpolateNode(c, p, lookup); err != nil {
				return err
			}
		}
	}
	return nil
}

// interpolate is compose's interpolation of one value: $$, $NAME,
// ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?message} and
// ${NAME?message}.
func interpolate(s string, lookup func(string) (string, bool)) (string, error) {
	nameLen := func(s string) int {
		n := 0
		for n < len(s) && (s[n] == '_' || 'A' <= s[n] && s[n] <= 'Z' || 'a' <= s[n] && s[n] <= 'z' || n > 0 && '0' <= s[n] && s[n] <= '9') {
			n++
		}
		return n
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		rest := s[i:]
		switch {
		case rest[0] != '$':
			b.WriteByte(rest[0])
		case strings.HasPrefix(rest, "$$"):
			b.WriteByte('$')
			i++
		case strings.HasPrefix(rest, "${"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return "", fmt.Errorf("invalid interpolation format for %q", s)
			}
			expr := rest[2:end]
			name, op := expr[:nameLen(expr)], expr[nameLen(expr):]
			v, set := lookup(name)
			switch {
			case name == "":
				return "", fmt.Errorf("invalid interpolation format for %q", s)
			case op == "":
			case strings.HasPrefix(op, ":-"):
				if v == "" {
					v = op[2:]
				}
			case strings.HasPrefix(op, "-"):
				if !set {
					v = op[1:]
				}
			case strings.HasPrefix(op, ":?"):
				if v == "" {
					return "", fmt.Errorf("required variable %s is missing a value: %s", name, op[2:])
				}
			case strings.HasPrefix(op, "?"):
				if !set {
					return "", fmt.Errorf("required variable %s is missing a value: %s", name, op[1:])
				}
			default:
				return "", fmt.Errorf("invalid interpolation format for %q", s)
			}
			b.WriteString(v)
			i += end
		default:
			n := nameLen(rest[1:])
			v, _ := lookup(rest[1 : 1+n])
			b.WriteString(v)
			if n == 0 {
				b.WriteByte('$')
			}
			i += n
		}
	}
	return b.String(), nil
}

// readDotEnv reads a .env file as compose does the lines the README
// writes: NAME=value, optionally quoted; blank lines and # comments are
// skipped. No file is no variables.
func readDotEnv(path string) (map[string]string, error) {
	vars := map[string]string{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return vars, nil
	} else if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not NAME=value", path, line)
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		} else if i := strings.Index(v, " #"); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		vars[strings.TrimSpace(k)] = v
	}
	return vars, sc.Err()
}

// mounts returns the mapping of a service's container paths to where
// its volumes are here: a named volume a directory under state/volumes,
// a bind mount the project's file, which must exist (docker would make
// a directory in its place).
func mounts(s standInService, volumes map[string]any, state string) (func(string) string, error) {
	type mount struct{ in, here string }
	var ms []mount
	for _, v := range s.Volumes {
		parts := strings.Split(strings.Fields(v)[0], ":")
		if len(parts) < 2 {
			return nil, fmt.Errorf("volume %q has no container path", v)
		}
		here := parts[0]
		if strings.HasPrefix(here, "./") {
			if _, err := os.Stat(here); err != nil {
				return nil, fmt.Errorf("bind mount %s: %w", here, err)
			}
			here, _ = filepath.Abs(here)
		} else {
			if _, ok := volumes[here]; !ok {
				return nil, fmt.Errorf("volume %s is not declared", here)
			}
			here = filepath.Join(state, "volumes", here)
			if err := os.MkdirAll(here, 0o755); err != nil {
				return nil, err
			}
		}
		ms = append(ms, mount{parts[1], here})
	}
	var mapped func(string) string
	mapped = func(v string) string {
		if path, ok := strings.CutPrefix(v, "sqlite:"); ok { // a URL naming a file
			return "sqlite:" + mapped(path)
		}
		for _, m := range ms {
			if rest, ok := strings.CutPrefix(v, m.in); ok && (rest == "" || rest[0] == '/') {
				return m.here + rest
			}
		}
		return v
	}
	return mapped, nil
}

// TestComposeInterpolation: the stand-in interpolates as compose
// documents it.
func TestComposeInterpolation(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SET": "x", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct{ in, want, err string }{
		{"a $SET b ${SET} $$SET $$", "a x b x $SET $", ""},
		{"${UNSET:-d} ${EMPTY:-d} ${EMPTY-d} ${UNSET-d}", "d d  d", ""},
		{"${UNSET}|$UNSET|", "||", ""},
		{"${SET:?m}", "x", ""},
		{"${EMPTY:?say why}", "", "required variable EMPTY is missing a value: say why"},
		{"${UNSET?m}", "", "required variable UNSET is missing a value: m"},
		{"${EMPTY?m}", "", ""},
		{"${SET", "", "invalid interpolation format"},
	} {
		got, err := interpolate(tc.in, lookup)
		if tc.err == "" && (err != nil || got != tc.want) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("interpolate(%q) = %q, %v; want %q, error %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// standIns puts the stand-ins on a PATH of their own: docker (the
// stand-in above) and sagacity (this checkout's binary). sh runs a script
// in dir with them (see standInEnv); state is the stand-in's.
func standIns(t *testing.T, dir string) (state string, sh func(script string) (string, error)) {
	t.Helper()
	state = t.TempDir()
	environ := append(standInEnv(t, "docker", "sagacity"), "DOCKER_STAND_IN="+state)
	return state, func(script string) (string, error) {
		cmd := exec.Command("sh", "-ex")
		cmd.Dir, cmd.Env, cmd.Stdin = dir, environ, strings.NewReader(script)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// standInEnv is the test's environment without any SAGACITY_* variable of
// the test, and with a PATH whose first directory holds the stand-ins
// named, each this test binary under that name (see TestMain).
func standInEnv(t *testing.T, names ...string) []string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, name := range names {
		if err := os.Symlink(self, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	var environ []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SAGACITY_") && !strings.HasPrefix(kv, "PATH=") {
			environ = append(environ, kv)
		}
	}
	return append(environ, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// composeDir copies deploy/ (its files other than Go and .env) to
// dir/deploy, with the stand-ins.
func composeDir(t *testing.T) (dir, state string, sh func(script string) (string, error)) {
	t.Helper()
	dir = t.TempDir()
	src := filepath.Join(testkit.Root(t), "deploy")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "deploy"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".go") || e.Name() == ".env" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "deploy", e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	state, sh = standIns(t, dir)
	return dir, state, sh
}

// readEnv reads the server's environment the stand-in wrote.
func readEnv(t *testing.T, state string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "sagacity.env"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		vars[k] = v
	}
	return vars
}

// leaveOut runs script with the stand-ins, without its command that
// starts with step, and wants it to fail with want.
func leaveOut(t *testing.T, script, step, want string, sh func(string) (string, error)) {
	t.Helper()
	lines := strings.Split(script, "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, step) })
	if i < 0 {
		t.Fatalf("the README's commands have no %s…:\n%s", step, script)
	}
	out, err := sh(strings.Join(slices.Delete(lines, i, i+1), "\n"))
	if err == nil || !strings.Contains(out, want) {
		t.Errorf("the README's commands without %s… = %v; want them to fail with %q:\n%s", step, err, want, out)
	}
}

// TestComposeQuickStart runs the README's commands that start the compose
// stack, as written, against a copy of deploy/ with the stand-in for
// docker: each command finds what it needs made by an earlier one (the
// session key compose interpolates, the signing key file the server
// reads), and the same commands with a step left out fail as compose
// would. It then serves the stack's configuration (this checkout's server
// on PostgreSQL, signing in through an OpenID provider holding the
// realm's people, in place of the containers), runs the README's agent
// commands against it, and signs in each person the README lists, with
// the role it says.
func TestComposeQuickStart(t *testing.T) {
	t.Parallel()
	steps := testkit.ReadmeBlock(t, "compose")
	// Left out, a step's product is missing when a later one needs it.
	for _, tc := range []struct{ without, want string }{
		{"printf 'SAGACITY_SESSION_KEY=", "required variable SAGACITY_SESSION_KEY is missing a value"},
		{"docker compose run --rm --no-deps sagacity keygen", "sagacity: SAGACITY_SIGNING_KEY_FILE names /data/signing.key, which no earlier command made"},
	} {
		_, _, sh := composeDir(t)
		leaveOut(t, steps, tc.without, tc.want, sh)
	}

	dir, state, sh := composeDir(t)
	out, err := sh(steps)
	if err != nil {
		t.Fatalf("the README's compose commands failed: %v\n%s", err, out)
	}
	key := filepath.Join(state, "volumes", "data", "signing.key")
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 || !strings.Contains(out, "\nlocalhost+") {
		t.Errorf("after the README's commands the signing key is %v (%v), and they printed\n%s\nwant a 0600 key file and its public key", fi, err, out)
	}
	vars := readEnv(t, state)

	// The containers' places taken: PostgreSQL and the OpenID provider
	// the test runs, holding the realm's people, on a free address.
	var realm struct {
		Users []struct {
			Username, Email, FirstName, LastName string
			Credentials                          []struct{ Value string }
			Groups                               []string
		}
	}
	rb, err := os.ReadFile(filepath.Join(dir, "deploy", "keycloak-realm.json"))
	if err != nil || json.Unmarshal(rb, &realm) != nil {
		t.Fatalf("keycloak-realm.json: %v", err)
	}
	var users []authtest.User
	for _, u := range realm.Users {
		var groups []string
		for _, g := range u.Groups {
			groups = append(groups, strings.TrimPrefix(g, "/"))
		}
		users = append(users, authtest.User{ID: u.Username + "-id", Username: u.Username, Password: u.Credentials[0].Value,
			Email: u.Email, Name: u.FirstName + " " + u.LastName, Groups: groups})
	}
	p := authtest.NewProvider(t, users...)
	addr := freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	public := "http://localhost:" + port
	if vars["SAGACITY_PUBLIC_URL"] != "http://localhost:8080" || vars["SAGACITY_ADDR"] != "127.0.0.1:8080" {
		t.Fatalf("the stack serves %s at %s; the README's commands use localhost:8080", vars["SAGACITY_ADDR"], vars["SAGACITY_PUBLIC_URL"])
	}
	vars["SAGACITY_ADDR"], vars["SAGACITY_PUBLIC_URL"] = addr, public
	vars["SAGACITY_DATABASE_URL"] = testkit.PostgresURL(t)
	vars["SAGACITY_OIDC_ISSUER"] = p.Issuer
	vars["SAGACITY_OIDC_CLIENT_ID"], vars["SAGACITY_OIDC_CLIENT_SECRET"] = p.WebClient(t, public+"/auth/callback")
	start(t, vars)

	trial := strings.ReplaceAll(testkit.ReadmeBlock(t, "compose trial"), "localhost:8080", "localhost:"+port)
	cmd := exec.Command("sh", "-e")
	cmd.Stdin = strings.NewReader(trial)
	got, err := cmd.CombinedOutput()
	rest := string(got)
	for _, want := range []string{
		`{"sagaId":"po-7","journalSeq":1,"toolName":"reserveInventory","outcome":"EXECUTED","status":"RUNNING"`,
		`{"sagaId":"po-7","journalSeq":3,"toolName":"sendWireTransfer","outcome":"AWAITING_APPROVAL","status":"AWAITING_APPROVAL"`,
		`"journalSeq":3,"toolName":"sendWireTransfer"`, `"rule":"four-eyes"`, `"quorum":2,"approvedBy":[]`,
	} {
		i := strings.Index(rest, want)
		if err != nil || i < 0 {
			t.Fatalf("the README's agent commands = %v\n%s\nwant, in order, %s", err, got, want)
		}
		rest = rest[i+len(want):]
	}

	logins := strings.Split(strings.TrimSpace(testkit.ReadmeBlock(t, "compose logins")), "\n")
	for _, l := range logins {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("README login %q is not user, password, role", l)
		}
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		u := authtest.LoginHTTP(t, c, public+"/login", public+"/auth/callback", f[0], f[1])
		if code := status(t, c, "GET", u, ""); code != http.StatusFound {
			t.Fatalf("%s's sign-in: callback = %d, want 302", f[0], code)
		}
		resp, err := c.Get(public + "/")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(page), ">"+f[2]+"<") {
			t.Errorf("%s signed in: the console answers %d without the role %s", f[0], resp.StatusCode, f[2])
		}
	}
}
