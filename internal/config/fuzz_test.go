package config

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzConfigFile feeds the YAML reader anything: it never panics, every
// problem is one line that starts with the file's name, and what it
// accepts obeys the rules it checks.
func FuzzConfigFile(f *testing.F) {
	full, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full)
	for _, s := range []string{"", "tools:\n", "tools: [{name: a}]\n", "policy: {maxBody: 9223372036854775807MiB}\n",
		"tokens: [{name: a, sha256: x, roles: [agent]}]\n", "---\n---\n", "roles: {map: {\"\": [agent]}}\n",
		"tools:\n  - &a {name: x}\n  - *a\n", "a: !!binary gIGC\n"} {
		f.Add([]byte(s))
	}
	const prefix = "SAGACITY_CONFIG (fuzz.yaml): "
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := parseFile(prefix, data, nil)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, prefix) || strings.Contains(msg, "\n") {
				t.Errorf("parseFile(%q) error %q: want one line starting with %q", data, msg, prefix)
			}
			return
		}
		for _, tool := range file.Tools {
			if tool.Name == "" || !utf8.ValidString(tool.Name) || tool.Execute.URL == "" {
				t.Errorf("parseFile(%q) accepted tool %+v", data, tool)
			}
		}
		if p := file.Policy; p.MaxBodyBytes < minSize || p.MaxBodyBytes > maxSize || p.MaxResultBytes < minSize || p.MaxResultBytes > maxSize {
			t.Errorf("parseFile(%q) accepted sizes %+v", data, p)
		}
	})
}
