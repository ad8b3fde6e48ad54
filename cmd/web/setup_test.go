package main

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// The README's set-up commands, followed as written.

// TestReadmeStartHere: the make targets the README's first commands name
// exist, its command that makes the tests' database makes the database
// the tests use (run for real here: it makes it, or it is there), and
// the commands it says help lists are the binary's.
func TestReadmeStartHere(t *testing.T) {
	t.Parallel()
	root := testkit.Root(t)
	blocks := testkit.ReadmeBlock(t, "start here") + testkit.ReadmeBlock(t, "test database")
	var makes int
	for l := range strings.SplitSeq(blocks, "\n") {
		l, _, _ = strings.Cut(l, "#")
		f := strings.Fields(l)
		switch {
		case len(f) == 0:
		case f[0] == "make":
			makes++
			cmd := exec.Command("make", "-n", f[1])
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("make -n %s = %v\n%s", f[1], err, out)
			}
		case f[0] == "psql":
			u, err := url.Parse(testkit.DefaultPostgresURL)
			if err != nil {
				t.Fatal(err)
			}
			want := "psql -h " + u.Hostname() + " -U " + u.User.Username() + " -c 'CREATE DATABASE " + strings.TrimPrefix(u.Path, "/") + "'"
			if strings.TrimSpace(l) != want {
				t.Errorf("the README makes the tests' database with\n%s\nthe tests use %s: want\n%s", l, testkit.DefaultPostgresURL, want)
			}
			testkit.PostgresURL(t) // PostgreSQL is there (or the test skips, or fails under CI)
			out, err := exec.Command("sh", "-c", l).CombinedOutput()
			if err != nil && !strings.Contains(string(out), "already exists") {
				t.Errorf("%s = %v\n%s", l, err, out)
			}
		default:
			t.Errorf("the README's first commands hold %q, which this test does not know", l)
		}
	}
	if makes != 2 {
		t.Errorf("the README's first commands run make %d times, want make run and make test", makes)
	}

	var m []string
	for _, p := range testkit.Pages(t) {
		if m = regexp.MustCompile("`bin/sagacity help` lists its commands \\(([^)]*)\\)").FindStringSubmatch(p.Text); m != nil {
			break
		}
	}
	if m == nil {
		t.Fatal("neither README.md nor docs/*.md says which commands help lists")
	}
	var listed []string
	for _, n := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(m[1], -1) {
		listed = append(listed, n[1])
	}
	var have []string
	for _, c := range commands {
		if c.name != "help" {
			have = append(have, c.name)
		}
	}
	slices.Sort(listed)
	slices.Sort(have)
	if !slices.Equal(listed, have) {
		t.Errorf("the README says help lists %v; the binary's commands are %v", listed, have)
	}
}

// TestMakefileOffline: every program make runs or builds through go is a
// tool of the module, or of the module it is built from (tools/), so that
// go mod download fetches it; after go mod download (run here, as the
// README says, so the test holds whatever ran before it), gotestsum runs
// from the module cache with the network off, and every tool the Makefile
// builds has its packages there too.
func TestMakefileOffline(t *testing.T) {
	t.Parallel()
	root := testkit.Root(t)
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	gm, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := modfile.Parse("go.mod", gm, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`\$\(GO\) run \S+@\S+`).Find(mk); m != nil {
		t.Errorf("the Makefile runs %s: a program fetched at make time, not a tool of the module", m)
	}
	tools := regexp.MustCompile(`\$\(GO\) tool (\S+)`).FindAllSubmatch(mk, -1)
	if len(tools) == 0 {
		t.Fatal("the Makefile runs no go tool; gotestsum should be one")
	}
	for _, m := range tools {
		name := string(m[1])
		if !slices.ContainsFunc(mod.Tool, func(tl *modfile.Tool) bool { return filepath.Base(tl.Path) == name }) {
			t.Errorf("the Makefile runs go tool %s, which go.mod's tool block does not declare", name)
		}
	}
	// A tool of a module of its own (tools/go.mod: golangci-lint) is built
	// from that module, so go -C DIR mod download fetches it too.
	builds := regexp.MustCompile(`\$\(GO\) -C (\S+) build .* (\S+)\n`).FindAllSubmatch(mk, -1)
	if len(builds) == 0 {
		t.Error("the Makefile builds no tool from a module of its own; golangci-lint should be one (tools/go.mod)")
	}
	for _, m := range builds {
		dir, pkg := string(m[1]), string(m[2])
		b, err := os.ReadFile(filepath.Join(root, dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		tm, err := modfile.Parse(dir+"/go.mod", b, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(tm.Tool, func(tl *modfile.Tool) bool { return tl.Path == pkg }) {
			t.Errorf("the Makefile builds %s from %s, whose go.mod's tool block does not declare it", pkg, dir)
		}
	}
	// A package built by path rather than from this tree (./…) is a tool.
	var built []string
	for _, m := range regexp.MustCompile(`\$\(GO\) build .* ([a-z0-9.-]+\.[a-z]+/\S+)\n`).FindAllSubmatch(mk, -1) {
		path := string(m[1])
		if !slices.ContainsFunc(mod.Tool, func(tl *modfile.Tool) bool { return tl.Path == path }) {
			t.Errorf("the Makefile builds %s, which go.mod's tool block does not declare", path)
		}
		built = append(built, path)
	}
	if len(built) == 0 {
		t.Fatal("the Makefile builds no tool; make test should build mailpit once")
	}
	download := exec.Command("go", "mod", "download")
	download.Dir = root
	if out, err := download.CombinedOutput(); err != nil {
		t.Fatalf("go mod download: %v\n%s", err, out)
	}
	offline := func(goflags string, args ...string) *exec.Cmd {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS="+goflags)
		return cmd
	}
	if out, err := offline("-mod=mod", "tool", "gotestsum", "--version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "gotestsum version v") {
		t.Errorf("go tool gotestsum with GOPROXY=off = %v (it runs from the module cache, which go mod download fills)\n%s", err, out)
	}
	for _, path := range built {
		if out, err := offline("-mod=readonly", "list", "-deps", path).CombinedOutput(); err != nil {
			t.Errorf("go list -deps %s with GOPROXY=off = %v (make test builds it from the module cache, which go mod download fills)\n%s", path, err, out)
		}
	}
}

// serveTokens starts the server with vars, on a free loopback address,
// and checks that each token is taken and a missing one is not.
func serveTokens(t *testing.T, vars map[string]string, tokens map[string]string) {
	t.Helper()
	vars["SAGACITY_ADDR"] = "127.0.0.1:0"
	base, logs := start(t, vars)
	for name, tok := range tokens {
		if code := status(t, http.DefaultClient, "GET", base+"/sagacity/sagas", tok); code != http.StatusOK && code != http.StatusForbidden {
			t.Errorf("%s's token: GET /sagacity/sagas = %d, want it taken", name, code)
		}
		if strings.Contains(logs.String(), tok) {
			t.Errorf("%s's token appears in the server's log", name)
		}
	}
	if code := status(t, http.DefaultClient, "GET", base+"/sagacity/sagas", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /sagacity/sagas without a token = %d, want 401", code)
	}
}

// TestReadmeProduction runs the README's production commands, as
// written, in a directory of their own: the key file and the tokens
// they make are what a server in tokens mode starts with, and each token
// is taken.
func TestReadmeProduction(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, sh := standIns(t, dir)
	out, err := sh(testkit.ReadmeBlock(t, "production"))
	if err != nil {
		t.Fatalf("the README's production commands failed: %v\n%s", err, out)
	}
	_, printed, _ := strings.Cut(out, "# Give each token to its user alone; it is stored nowhere:\n")
	tokens := tokenLines(t, strings.Split(strings.TrimSpace(printed), "\n"))
	if len(tokens) != 2 {
		t.Fatalf("the README's production commands printed %d tokens:\n%s", len(tokens), out)
	}
	serveTokens(t, map[string]string{"SAGACITY_AUTH": "tokens", "SAGACITY_DATABASE_URL": testkit.SQLiteURL(t),
		"SAGACITY_SIGNING_KEY_FILE": filepath.Join(dir, "signing.key"), "SAGACITY_CONFIG": filepath.Join(dir, "sagacity.yaml"),
		"SAGACITY_CHECKPOINT_DIR": t.TempDir()}, tokens)
}

// TestReadmeDocker runs the README's docker commands, as written, from
// the repository's root, with the stand-in for docker: the container's
// server would start with what the commands before it made, and not
// without either; served with that environment, the token is taken.
func TestReadmeDocker(t *testing.T) {
	t.Parallel()
	root := testkit.Root(t)
	steps := testkit.ReadmeBlock(t, "docker")
	for _, tc := range []struct{ without, want string }{
		{"docker run --rm -v sagacity-data:/data sagacity keygen", "sagacity: SAGACITY_SIGNING_KEY_FILE names /data/signing.key, which no earlier command made"},
		{"docker run --rm -v sagacity-data:/data sagacity token", "sagacity.yaml): cannot read: no such file or directory"},
	} {
		_, sh := standIns(t, root)
		leaveOut(t, steps, tc.without, tc.want, sh)
	}
	state, sh := standIns(t, root)
	out, err := sh(steps)
	if err != nil {
		t.Fatalf("the README's docker commands failed: %v\n%s", err, out)
	}
	_, printed, _ := strings.Cut(out, "# Give each token to its user alone; it is stored nowhere:\n")
	printed, _, _ = strings.Cut(printed, "\n")
	tokens := tokenLines(t, []string{printed})
	vars := readEnv(t, state)
	if vars["SAGACITY_ADDR"] != "0.0.0.0:8080" || vars["SAGACITY_DATABASE_URL"] != "sqlite:"+filepath.Join(state, "volumes", "sagacity-data", "sagacity.db") {
		t.Errorf("the container's server listens at %s on %s; want the image's 0.0.0.0:8080 and its volume's SQLite", vars["SAGACITY_ADDR"], vars["SAGACITY_DATABASE_URL"])
	}
	if _, err := config.Load(func(k string) string { return vars[k] }); err != nil {
		t.Fatal(err)
	}
	serveTokens(t, vars, tokens)
}

// TestSagacityStandIn: the sagacity on the stand-ins' PATH is this
// checkout's binary.
func TestSagacityStandIn(t *testing.T) {
	t.Parallel()
	_, sh := standIns(t, t.TempDir())
	out, err := sh("sagacity version")
	var want bytes.Buffer
	_ = run(context.Background(), []string{"version"}, nil, &want)
	if err != nil || !strings.HasSuffix(out, want.String()) {
		t.Errorf("sagacity version on the stand-ins' PATH = %v\n%s\nwant %s", err, out, want.String())
	}
}

// TestPublicModules: the modules of this tree that go.mod replaces by
// their directories are the Makefile's MODULES (which make check, test,
// lint and bench reach into, as ./... does not), and the Dockerfile's
// go mod download finds them: run here on the files the Dockerfile
// copies before it, and no others.
func TestPublicModules(t *testing.T) {
	t.Parallel()
	root := testkit.Root(t)
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	mod, err := modfile.Parse("go.mod", []byte(read("go.mod")), nil)
	if err != nil {
		t.Fatal(err)
	}
	var replaced []string
	for _, r := range mod.Replace {
		if modfile.IsDirectoryPath(r.New.Path) {
			replaced = append(replaced, filepath.ToSlash(filepath.Clean(r.New.Path)))
		}
	}
	if len(replaced) == 0 {
		t.Fatal("go.mod replaces no module by a directory; the client's should be one")
	}
	slices.Sort(replaced)

	m := regexp.MustCompile(`(?m)^MODULES \?= (.*)$`).FindStringSubmatch(read("Makefile"))
	if m == nil {
		t.Fatal("the Makefile sets no MODULES")
	}
	listed := strings.Fields(m[1])
	slices.Sort(listed)
	if !slices.Equal(listed, replaced) {
		t.Errorf("the Makefile's MODULES are %v; go.mod replaces %v by their directories", listed, replaced)
	}

	// The build stage up to go mod download, in a directory of its own.
	dockerfile := read("Dockerfile")
	stage, _, ok := strings.Cut(dockerfile, "RUN go mod download")
	if !ok {
		t.Fatal("the Dockerfile runs no go mod download")
	}
	dir := t.TempDir()
	for _, c := range regexp.MustCompile(`(?m)^COPY (.+)$`).FindAllStringSubmatch(stage, -1) {
		f := strings.Fields(c[1])
		dest := f[len(f)-1]
		for _, src := range f[:len(f)-1] {
			to := filepath.Join(dir, dest)
			if strings.HasSuffix(dest, "/") {
				to = filepath.Join(to, filepath.Base(src))
			}
			if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(to, []byte(read(src)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command("go", "mod", "download")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("go mod download on what the Dockerfile copies before it: %v\n%s", err, out)
	}
}
