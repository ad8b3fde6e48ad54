package client_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"

	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestOutside: a module of one's own, outside this repository, that
// requires the client at a pseudo-version is tidied, built and vetted
// offline, from a proxy that serves this tree's modules and only the
// modules their go.sum files name, in a module cache of its own; its
// go.mod then requires nothing of the server, and the program it built
// calls a server.
func TestOutside(t *testing.T) {
	t.Parallel()
	s := newServer(t, sqliteURL(t.TempDir()))
	root := testkit.Root(t)
	proxy := t.TempDir()

	// The client's module, and every module of this tree it requires (a
	// replace by a directory), published as a release would publish them:
	// the client at the pseudo-version the program asks for, the others
	// at the versions the modules that require them name.
	const pseudo = "v0.0.0-20260102030405-0123456789ab"
	clientDir := moduleDir(t, filepath.Join(root, "client"))
	clientMod := readMod(t, clientDir)
	published := map[string]bool{clientMod.Module.Mod.Path: true}
	publish(t, proxy, module.Version{Path: clientMod.Module.Mod.Path, Version: pseudo}, clientDir)
	sums := []string{filepath.Join(clientDir, "go.sum")}
	var sdkRequires []*modfile.Require
	for queue := []string{clientDir}; len(queue) > 0; queue = queue[1:] {
		dir := queue[0]
		f := readMod(t, dir)
		sdkRequires = append(sdkRequires, f.Require...)
		for _, r := range f.Replace {
			if !modfile.IsDirectoryPath(r.New.Path) || published[r.Old.Path] {
				continue
			}
			v := required(t, f, r.Old.Path)
			sub := filepath.Join(dir, r.New.Path)
			publish(t, proxy, module.Version{Path: r.Old.Path, Version: v}, sub)
			published[r.Old.Path] = true
			sums = append(sums, filepath.Join(sub, "go.sum"))
			queue = append(queue, sub)
		}
	}
	// Every other module the published modules' go.sum files name, and
	// nothing else, from this machine's module cache (where go mod
	// download and go list -m put what it lacks, from GOPROXY, as they do
	// for a build here): the public proxy has every module, so only this
	// proxy shows what a program outside needs.
	named := map[module.Version]bool{} // → its zip is named, not only its go.mod
	for _, sum := range sums {
		for m, zipped := range sumModules(t, sum) {
			if !published[m.Path] {
				named[m] = named[m] || zipped
			}
		}
	}
	mods, zips := []string{"list", "-m"}, []string{"mod", "download"}
	for m, zipped := range named {
		mods = append(mods, m.String())
		if zipped {
			zips = append(zips, m.String())
		}
	}
	for _, args := range [][]string{mods, zips} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = t.TempDir(), append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s %s: %v\n%s", args[0], args[1], err, out)
		}
	}
	download := filepath.Join(goEnv(t, "GOMODCACHE"), "cache", "download")
	for m, zipped := range named {
		mirror(t, proxy, download, m, zipped)
	}

	// The program: an agent's call of a gated tool.
	dir := t.TempDir()
	write(t, filepath.Join(dir, "go.mod"), "module example.com/agent\n\ngo 1.26.0\n\nrequire "+clientMod.Module.Mod.Path+" "+pseudo+"\n")
	write(t, filepath.Join(dir, "main.go"), `package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/sagacity-go/sagacity/client"
)

func main() {
	agent := &client.Client{BaseURL: os.Getenv("SAGACITY_URL"), Token: os.Getenv("SAGACITY_AGENT_TOKEN")}
	call, err := agent.Call(context.Background(), "outside-1", "sendWireTransfer", `+"`"+`{"amount":"100","to":"alice"}`+"`"+`)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(call.Outcome, call.JournalSeq)
}
`)
	env := append(os.Environ(), "GOPROXY=file://"+filepath.ToSlash(proxy), "GOMODCACHE="+t.TempDir(),
		"GOFLAGS=-modcacherw -trimpath", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local",
		"SAGACITY_URL="+s.url, "SAGACITY_AGENT_TOKEN="+tokens["agent"])
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s in a module outside (GOPROXY of this tree's modules and what their go.sum names): %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("go", "mod", "tidy")
	run("go", "build", "-o", "agent", ".")
	run("go", "vet", "./...")
	if got, want := run("./agent"), "AWAITING_APPROVAL 1\n"; got != want {
		t.Errorf("the program built outside printed %q, want %q", got, want)
	}

	// Nothing of the server: not its module, nor a module only it needs.
	server := readMod(t, root)
	if published[server.Module.Mod.Path] {
		t.Errorf("the client's module is %s or requires it: the server's", server.Module.Mod.Path)
	}
	serverOnly := map[string]bool{server.Module.Mod.Path: true}
	for _, r := range server.Require {
		serverOnly[r.Mod.Path] = true
	}
	for _, r := range sdkRequires {
		delete(serverOnly, r.Mod.Path)
	}
	for path := range published {
		if path != server.Module.Mod.Path {
			delete(serverOnly, path)
		}
	}
	for _, r := range readMod(t, dir).Require {
		if serverOnly[r.Mod.Path] {
			t.Errorf("the program's go.mod requires %s, which only the server needs: the client's module must be its own", r.Mod)
		}
	}
}

// moduleDir is the directory of the module that holds dir.
func moduleDir(t *testing.T, dir string) string {
	t.Helper()
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", dir)
		}
	}
}

func readMod(t *testing.T, dir string) *modfile.File {
	t.Helper()
	name := filepath.Join(dir, "go.mod")
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(name, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// required is the version of path that f requires.
func required(t *testing.T, f *modfile.File, path string) string {
	t.Helper()
	for _, r := range f.Require {
		if r.Mod.Path == path {
			return r.Mod.Version
		}
	}
	t.Fatalf("%s replaces %s, which it does not require", f.Module.Mod.Path, path)
	return ""
}

// publish writes the module in dir to the proxy at m's version, as a
// GOPROXY serves it: its go.mod, its zip and its info.
func publish(t *testing.T, proxy string, m module.Version, dir string) {
	t.Helper()
	at := atDir(t, proxy, m)
	var z bytes.Buffer
	if err := zip.CreateFromDir(&z, m, dir); err != nil {
		t.Fatalf("zip of %s from %s: %v", m, dir, err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at, m.Version+".zip"), z.String())
	write(t, filepath.Join(at, m.Version+".mod"), string(mod))
	writeInfo(t, at, m.Version)
}

// mirror serves m from the module cache's download directory, by links:
// its go.mod, and its zip when zipped.
func mirror(t *testing.T, proxy, download string, m module.Version, zipped bool) {
	t.Helper()
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	at := atDir(t, proxy, m)
	exts := []string{".mod"}
	if zipped {
		exts = append(exts, ".zip")
	}
	for _, ext := range exts {
		if err := os.Symlink(filepath.Join(download, esc, "@v", m.Version+ext), filepath.Join(at, m.Version+ext)); err != nil {
			t.Fatal(err)
		}
	}
	writeInfo(t, at, m.Version)
}

// atDir is the proxy's directory of m's versions, made.
func atDir(t *testing.T, proxy string, m module.Version) string {
	t.Helper()
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(proxy, esc, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	return at
}

func writeInfo(t *testing.T, at, version string) {
	t.Helper()
	info, err := json.Marshal(map[string]string{"Version": version, "Time": "2026-01-02T03:04:05Z"})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at, version+".info"), string(info))
}

// sumModules are the module versions a go.sum names, each true when it
// names the module's zip, false when only its go.mod.
func sumModules(t *testing.T, name string) map[module.Version]bool {
	t.Helper()
	b, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return nil // a module that requires nothing
	}
	if err != nil {
		t.Fatal(err)
	}
	ms := map[module.Version]bool{}
	for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			t.Fatalf("%s: %q is not a go.sum line", name, sc.Text())
		}
		v, goMod := strings.CutSuffix(f[1], "/go.mod")
		m := module.Version{Path: f[0], Version: v}
		ms[m] = ms[m] || !goMod
	}
	return ms
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

func write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
