package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// TestHelp: help, and --help on any command wherever it stands, prints
// the command's usage instead of running it; the server's lists every
// variable with its default and an example.
func TestHelp(t *testing.T) {
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
	for _, text := range []string{all, out("--help"), out("serve", "--help"), out("help", "serve"), out("healthcheck", "-h")} {
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
	for _, args := range [][]string{{"help", "nosuch"}, {"nosuch"}, {"serve", "extra"}} {
		err := run(context.Background(), args, nil, &bytes.Buffer{})
		if ee, ok := errors.AsType[exitError](err); !ok || ee.code != 2 || !strings.Contains(err.Error(), "sagacity help") {
			t.Errorf("sagacity %s = %v, want exit 2 pointing at sagacity help", strings.Join(args, " "), err)
		}
	}
}

func TestVersion(t *testing.T) {
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
