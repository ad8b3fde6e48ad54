package config

import (
	"log/slog"
	"strings"
	"testing"
)

// TestVarsComplete: Vars, which help prints and CheckNames accepts, is
// exactly what Load reads.
func TestVarsComplete(t *testing.T) {
	read := map[string]bool{}
	getenv := func(k string) string {
		read[k] = true
		return map[string]string{"SAGACITY_AUTH": "dev"}[k]
	}
	if _, err := Load(getenv); err != nil {
		t.Fatal(err)
	}
	for _, v := range Vars {
		if !read[v.Name] {
			t.Errorf("Vars lists %s, which Load never reads", v.Name)
		}
		if v.Default == "" || v.Example == "" || v.Meaning == "" {
			t.Errorf("%s: default %q, example %q, meaning %q; want all three for help", v.Name, v.Default, v.Example, v.Meaning)
		}
		delete(read, v.Name)
	}
	for name := range read {
		t.Errorf("Load reads %s, which Vars does not list", name)
	}
}

func TestCheckNames(t *testing.T) {
	for _, tc := range []struct {
		environ []string
		want    string // "" for no error
	}{
		{[]string{"PATH=/bin", "SAGACITY_ADDR=127.0.0.1:0", "SAGACITY_LOG_LEVEL=debug"}, ""},
		{[]string{"SAGACITY_ADRR=127.0.0.1:9"}, "SAGACITY_ADRR: not a setting; did you mean SAGACITY_ADDR?"},
		{[]string{"SAGACITY_DATABASE_URI=sqlite:x"}, "SAGACITY_DATABASE_URI: not a setting; did you mean SAGACITY_DATABASE_URL?"},
		{[]string{"SAGACITY_SIGNINGKEY=x"}, "did you mean SAGACITY_SIGNING_KEY?"},
		{[]string{"SAGACITY_FROBNICATE=1"}, "SAGACITY_FROBNICATE: not a setting; unset it"},
		{[]string{"sagacity_addr=x", "OTHER_SAGACITY_X=1"}, ""},
		{[]string{"SAGACITY_URL=http://127.0.0.1:8080", "SAGACITY_TOKEN=sgc_x"}, ""}, // sagacity hook's, in the same shell
	} {
		err := CheckNames(tc.environ)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckNames(%q) = %v, want nil", tc.environ, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckNames(%q) = %v, want an error containing %q", tc.environ, err, tc.want)
		}
	}
}

func TestLogLevel(t *testing.T) {
	for v, want := range map[string]slog.Level{"": slog.LevelInfo, "debug": slog.LevelDebug, "WARN": slog.LevelWarn, "error": slog.LevelError} {
		c, err := Load(env(map[string]string{"SAGACITY_LOG_LEVEL": v}))
		if err != nil || c.LogLevel != want {
			t.Errorf("SAGACITY_LOG_LEVEL=%q: %v, %v; want %v", v, c.LogLevel, err, want)
		}
	}
	for _, v := range []string{"verbose", "info+2", "0"} {
		if _, err := Load(env(map[string]string{"SAGACITY_LOG_LEVEL": v})); err == nil || !strings.HasPrefix(err.Error(), "SAGACITY_LOG_LEVEL: ") {
			t.Errorf("SAGACITY_LOG_LEVEL=%q: %v, want refused", v, err)
		}
	}
}
