package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestHelp: help, and --help on any command wherever it stands, prints
// the command's usage instead of running it; the server's lists every
// variable with its default and an example.
func TestHelp(t *testing.T) {
	t.Parallel()
	out := func(args ...string) string {
		t.Helper()
		var b bytes.Buffer
		if err := run(context.Background(), args, nil, &b); err != nil {
			t.Fatalf("sagacity %s: %v", strings.Join(args, " "), err)
		}
		return b.String()
	}
	all := out("help")
	for _, c := range commands {
		if !strings.Contains(all, "  "+c.name+" ") {
			t.Errorf("sagacity help does not list %s:\n%s", c.name, all)
		}
	}
	for _, text := range []string{all, out("--help"), out("serve", "--help"), out("help", "serve")} {
		for _, v := range config.Vars {
			if !strings.Contains(text, v.Name) || !strings.Contains(text, v.Default) || !strings.Contains(text, v.Example) {
				t.Errorf("help lacks %s, its default %q or its example %q:\n%s", v.Name, v.Default, v.Example, text)
			}
		}
	}
	for _, args := range [][]string{{"verify", "--help"}, {"verify", "-key", "x", "-h"}, {"help", "verify"}} {
		if got := out(args...); !strings.HasPrefix(got, "usage: sagacity verify [-key PUBLIC_KEY") || strings.Contains(got, "SAGACITY_ADDR") {
			t.Errorf("sagacity %s = %q, want verify's usage alone", strings.Join(args, " "), got)
		}
	}
	for _, args := range [][]string{{"help", "nosuch"}, {"nosuch"}, {"serve", "extra"}, {"help", "serve", "verify"}} {
		err := run(context.Background(), args, nil, &bytes.Buffer{})
		if ee, ok := errors.AsType[exitError](err); !ok || ee.code != 2 || !strings.Contains(err.Error(), "sagacity help") {
			t.Errorf("sagacity %s = %v, want exit 2 pointing at sagacity help", strings.Join(args, " "), err)
		}
	}
}

// TestCommandHelp: every command's --help, -h and -help, wherever they
// stand, and help COMMAND print that command's usage and nothing else,
// and exit 0; only serve, which reads them all, lists the variables.
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {c.name, "-help"}, {"help", c.name}, {c.name, "x", "--help"}} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				var got bytes.Buffer
				if err := run(context.Background(), args, nil, &got); err != nil {
					t.Fatalf("sagacity %s = %v, want its usage", strings.Join(args, " "), err)
				}
				want := "usage: sagacity " + c.name + " " + c.args + "\n\n" + c.help + "\n"
				vars := strings.Contains(got.String(), "SAGACITY_LOG_LEVEL")
				flags, _ := strings.CutPrefix(got.String(), want)
				switch {
				case !strings.HasPrefix(got.String(), want):
					t.Errorf("sagacity %s =\n%s\nwant it to start with\n%s", strings.Join(args, " "), got.String(), want)
				case vars != (c.name == "serve"):
					t.Errorf("sagacity %s lists the variables: %v; want them listed for serve alone:\n%s", strings.Join(args, " "), vars, got.String())
				case c.name != "serve" && (c.flags == nil) != (flags == ""):
					t.Errorf("sagacity %s =\n%s\nwant exactly\n%s\nand its flags, if it has any", strings.Join(args, " "), got.String(), want)
				case c.flags != nil && !strings.HasPrefix(flags, "\nflags:\n"):
					t.Errorf("sagacity %s ends with %q; want its flags", strings.Join(args, " "), flags)
				}
			})
		}
	}
}

// TestHelpFlags: each command's help lists every flag it takes, in its
// usage line and with what it does; the help shows the flags the command
// parses, declared once.
func TestHelpFlags(t *testing.T) {
	t.Parallel()
	for name, flags := range map[string][]string{
		"verify":         {"key", "checkpoint", "allow-unproved", "allow-dev", "allow-unproved-sign-in", "provider-keys"},
		"verify-receipt": {"key", "allow-dev", "passkeys", "checkpoint"},
		"verify-log":     {"key", "proof"},
		"token":          {"config", "name", "roles", "groups"},
		"policy":         {"canonical"},
		"keygen":         {"name", "out"},
	} {
		var b bytes.Buffer
		if err := run(context.Background(), []string{name, "--help"}, nil, &b); err != nil {
			t.Fatalf("sagacity %s --help: %v", name, err)
		}
		usage, listed, _ := strings.Cut(b.String(), "\nflags:\n")
		usage, _, _ = strings.Cut(usage, "\n")
		c, _ := find(name)
		if c.flags == nil {
			t.Errorf("sagacity %s declares no flags for its help; want %v", name, flags)
			continue
		}
		declared := newFlags(name, c.flags)
		for _, f := range flags {
			if !strings.Contains(usage, "-"+f+" ") && !strings.Contains(usage, "[-"+f+"]") {
				t.Errorf("sagacity %s --help: the usage line %q does not name -%s", name, usage, f)
			}
			if d := declared.Lookup(f); d == nil || !strings.Contains(listed, "  -"+f) || !strings.Contains(listed, d.Usage) {
				t.Errorf("sagacity %s --help does not list -%s with what it does:\n%s", name, f, b.String())
			}
		}
		n := 0
		declared.VisitAll(func(*flag.Flag) { n++ })
		if n != len(flags) {
			t.Errorf("sagacity %s declares %d flags; want %d, %v", name, n, len(flags), flags)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := run(context.Background(), []string{"version"}, nil, &b); err != nil || b.String() != "sagacity "+version()+"\n" || version() == "" {
		t.Errorf("sagacity version = %q, %v", b.String(), err)
	}
	buildVersion = "v1.2.3"
	defer func() { buildVersion = "" }()
	if version() != "v1.2.3" {
		t.Errorf("version() = %q with a stamped version, want it", version())
	}
}

// TestHealthcheck: the container's probe answers 0 for a ready server,
// at the address SAGACITY_ADDR names or the URL given, and 1 otherwise.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	base, _ := start(t, map[string]string{"SAGACITY_DATABASE_URL": testkit.SQLiteURL(t)})
	var b bytes.Buffer
	if err := run(context.Background(), []string{"healthcheck", base + "/readyz"}, nil, &b); err != nil || b.String() != "ok\n" {
		t.Errorf("healthcheck %s = %q, %v; want ok", base, b.String(), err)
	}
	addr := strings.TrimPrefix(base, "http://")
	_, port, _ := net.SplitHostPort(addr)
	if err := run(context.Background(), []string{"healthcheck"}, env(map[string]string{"SAGACITY_ADDR": "0.0.0.0:" + port}), &bytes.Buffer{}); err != nil {
		t.Errorf("healthcheck with SAGACITY_ADDR=0.0.0.0:%s = %v; want it to ask 127.0.0.1", port, err)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	err = run(context.Background(), []string{"healthcheck", "http://" + closed.Addr().String() + "/readyz"}, nil, &bytes.Buffer{})
	if ee, ok := errors.AsType[exitError](err); !ok || ee.code != 1 {
		t.Errorf("healthcheck of nothing = %v, want exit 1", err)
	}
}

// TestPolicyCommand: sagacity policy prints the hash requests will carry
// for a configuration file, and refuses one whose condition does not
// compile, naming the rule and the column.
func TestPolicyCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("approval:\n  tools:\n    sendWireTransfer:\n      - {name: up-to-1000, when: \"double(payload.amount) <= 1000.0\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := engine.CompilePolicy(engine.PolicySpec{Default: engine.DefaultPolicy.Default, Tools: map[string][]engine.RuleSpec{
		"sendWireTransfer": {{Name: "up-to-1000", When: "double(payload.amount) <= 1000.0"}}}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"policy", good}, nil, &out); err != nil ||
		!strings.HasPrefix(out.String(), "# approval policy sha256:"+want.Hash+"\n") || !strings.Contains(out.String(), `"when": "double(payload.amount) <= 1000.0"`) ||
		!strings.Contains(out.String(), "# sagacity policy -canonical "+good+" | sha256sum\n") {
		t.Errorf("policy %s = %v\n%s\nwant the hash %s, how to hash it again, and the rule", good, err, out.String(), want.Hash)
	}
	// The indented document is not what is hashed; -canonical prints
	// exactly what is.
	var canon bytes.Buffer
	if err := run(context.Background(), []string{"policy", "-canonical", good}, nil, &canon); err != nil ||
		canon.String() != want.Text || engine.PayloadHash(canon.String()) != want.Hash {
		t.Errorf("policy -canonical %s = %v\n%q\nwant exactly the bytes whose SHA-256 is %s:\n%q", good, err, canon.String(), want.Hash, want.Text)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("approval:\n  default:\n    - when: payload.amount >\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"policy", bad}, nil, io.Discard)
	if e, ok := errors.AsType[exitError](err); !ok || e.code != 2 || !strings.Contains(err.Error(), "default, rule 1 (default#1): condition, column 17") {
		t.Errorf("policy %s = %v; want exit status 2 naming the rule and the column", bad, err)
	}
}
