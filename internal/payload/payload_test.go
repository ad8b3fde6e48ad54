package payload

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCompare(t *testing.T) {
	long := strings.Repeat("lorem ipsum ", 5)
	tests := []struct {
		name     string
		old, new string
		want     Diff
	}{
		{"identical", `{"a":1}`, `{"a":1}`, Diff{Identical: true, JSON: true}},
		{"identical text", `hello`, `hello`, Diff{Identical: true}},
		{"re-planned amount", `{"amount":"250.00","to":"bob"}`, `{"amount":"2500.00","to":"bob"}`,
			Diff{JSON: true, Changes: []Change{{Path: "amount", Kind: Changed, Old: `"250.00"`, New: `"2500.00"`}}}},
		{"only formatting", `{"amount":"100","to":"alice"}`, `{ "to": "alice",  "amount": "100" }`, Diff{JSON: true, FormattingOnly: true}},
		{"numbers by value", `{"n":1,"m":[0.5e1, -0]}`, `{"n":1.0,"m":[5,0]}`, Diff{JSON: true, FormattingOnly: true}},
		{"escapes by value", `{"a":"\u0041"}`, `{"a":"A"}`, Diff{JSON: true, FormattingOnly: true}},
		{"number changed", `{"n":1}`, `{"n":1.01}`, Diff{JSON: true, Changes: []Change{{Path: "n", Kind: Changed, Old: "1", New: "1.01"}}}},
		{"huge exponents", `{"n":1e999999999999999999999}`, `{"n":1e999999999999999999998}`,
			Diff{JSON: true, Changes: []Change{{Path: "n", Kind: Changed, Old: "1e999999999999999999999", New: "1e999999999999999999998"}}}},
		{"added and removed", `{"a":1,"b":{"c":true}}`, `{"b":{"c":true,"d":null},"e":"x"}`, Diff{JSON: true, Changes: []Change{
			{Path: "a", Kind: Removed, Old: "1"}, {Path: "b.d", Kind: Added, New: "null"}, {Path: "e", Kind: Added, New: `"x"`}}}},
		{"nested arrays", `{"items":[{"sku":"A","qty":1},{"sku":"B"}]}`, `{"items":[{"sku":"A","qty":2}]}`, Diff{JSON: true, Changes: []Change{
			{Path: "items[0].qty", Kind: Changed, Old: "1", New: "2"}, {Path: "items[1]", Kind: Removed, Old: `{"sku":"B"}`}}}},
		{"type changed", `{"a":[1]}`, `{"a":{"0":1}}`, Diff{JSON: true, Changes: []Change{{Path: "a", Kind: Changed, Old: "[1]", New: `{"0":1}`}}}},
		{"odd key", `{"a b":1}`, `{"a b":2}`, Diff{JSON: true, Changes: []Change{{Path: `["a b"]`, Kind: Changed, Old: "1", New: "2"}}}},
		{"whole payload", `1`, `2`, Diff{JSON: true, Changes: []Change{{Path: "", Kind: Changed, Old: "1", New: "2"}}}},
		{"long string diffed within", `{"memo":"` + long + `"}`, `{"memo":"` + strings.Replace(long, "ipsum", "IPSUM", 1) + `"}`,
			Diff{JSON: true, Changes: []Change{{Path: "memo", Kind: Changed, Old: `"` + long + `"`, New: `"` + strings.Replace(long, "ipsum", "IPSUM", 1) + `"`,
				Edits: []Edit{{Same, "lorem "}, {Delete, "ipsum"}, {Insert, "IPSUM"}, {Same, strings.TrimPrefix(long, "lorem ipsum")}}}}}},
		{"not JSON", `to alice`, `to bob`, Diff{Changes: []Change{{Kind: Changed, Old: "to alice", New: "to bob",
			Edits: []Edit{{Same, "to "}, {Delete, "alice"}, {Insert, "bob"}}}}}},
		{"duplicate keys are not JSON here", `{"a":1,"a":2}`, `{"a":1}`, Diff{Changes: []Change{{Kind: Changed, Old: `{"a":1,"a":2}`, New: `{"a":1}`,
			Edits: []Edit{{Same, `{"a":1`}, {Delete, `,"a":2`}, {Same, "}"}}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Compare(tt.old, tt.new)); diff != "" {
				t.Errorf("Compare(%q, %q) (-want +got):\n%s", tt.old, tt.new, diff)
			}
		})
	}
}

func TestPretty(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{`{"b":1,"a":[true,null,{"c":"x"}],"e":{},"f":[]}`, "{\n  \"b\": 1,\n  \"a\": [\n    true,\n    null,\n    {\n      \"c\": \"x\"\n    }\n  ],\n  \"e\": {},\n  \"f\": []\n}", true},
		{`{"n":1.50e2}`, "{\n  \"n\": 1.50e2\n}", true},
		{`"<script>"`, `"<script>"`, true},
		{`not json`, `not json`, false},
		{`{"a":1} {}`, `{"a":1} {}`, false},
	}
	for _, tt := range tests {
		if got, ok := Pretty(tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("Pretty(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestInspect(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Finding
	}{
		{"clean", `{"amount":"100","to":"alice","note":"line1\nline2\tend"}`, nil},
		{"bidi override", "{\"to\":\"alice\u202E\"}", []Finding{{Bidi, "U+202E RIGHT-TO-LEFT OVERRIDE at byte 12"}}},
		{"zero width", "{\"to\":\"al\u200Bice\"}", []Finding{{Invisible, "U+200B ZERO WIDTH SPACE at byte 9"}}},
		{"control", "a\x07b", []Finding{{Control, "U+0007 at byte 1"}}},
		{"no-break space", "100\u00a0000", []Finding{{Space, "U+00A0 NO-BREAK SPACE at byte 3"}}},
		{"look-alike key", "{\"\u0430mount\":\"1\"}", []Finding{{LookAlike, "key [\"\u0430mount\"] contains U+0430 CYRILLIC SMALL LETTER A"}}},
		{"mixed scripts", "{\"to\":\"\u0430lice\"}", []Finding{{Mixed, "to mixes the letters of several scripts"}}},
		{"one script is fine", `{"to":"Зоя"}`, nil},
		{"invalid UTF-8", "ok\xff", []Finding{{NotUTF8, "byte 0xff at byte 2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Inspect(tt.in)); diff != "" {
				t.Errorf("Inspect(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
	if n := len(Inspect(strings.Repeat("\u200B", 100))); n != maxFindings {
		t.Errorf("Inspect(100 zero-width spaces) = %d findings, want %d", n, maxFindings)
	}
}

func TestReveal(t *testing.T) {
	got := Reveal("pay \u202Eeilla\u202C\xff ok")
	want := []Segment{{Text: "pay "}, {Text: "U+202E", Flag: Bidi, Name: "U+202E RIGHT-TO-LEFT OVERRIDE"}, {Text: "eilla"},
		{Text: "U+202C", Flag: Bidi, Name: "U+202C POP DIRECTIONAL FORMATTING"}, {Text: `\xff`, Flag: NotUTF8, Name: "a byte that is not a character"}, {Text: " ok"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Reveal (-want +got):\n%s", diff)
	}
	var back strings.Builder
	for _, s := range Reveal("plain <b>text</b>\n\twith \"quotes\"") {
		back.WriteString(s.Text)
	}
	if back.String() != "plain <b>text</b>\n\twith \"quotes\"" {
		t.Errorf("Reveal(plain) changed the text: %q", back.String())
	}
}

// FuzzPayload: whatever the bytes, nothing panics, a payload equals
// itself, and revealing text loses nothing but the flagged characters it
// names.
func FuzzPayload(f *testing.F) {
	f.Add(`{"amount":"250.00","to":"bob"}`, `{"amount":"2500.00","to":"bob"}`)
	f.Add("{\"to\":\"\u0430lice\u202E\"}", `[1,2,{"a":null}]`)
	f.Add(`{"n":1e99999999999999999999}`, "\xff\x00")
	f.Fuzz(func(t *testing.T, a, b string) {
		if d := Compare(a, a); !d.Identical || len(d.Changes) != 0 {
			t.Errorf("Compare(%q, itself) = %+v", a, d)
		}
		if d := Compare(a, b); a != b && !d.FormattingOnly && len(d.Changes) == 0 {
			t.Errorf("Compare(%q, %q) found neither a change nor formatting", a, b)
		}
		Pretty(b)
		Inspect(a)
		n := 0
		for _, s := range Reveal(a) {
			if s.Flag == "" {
				n += len(s.Text)
			}
		}
		if n > len(a) {
			t.Errorf("Reveal(%q) grew the text", a)
		}
	})
}

func TestSummary(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want []Field
		more int
	}{
		{`{"amount":"2500.00","to":"bob"}`, 4, []Field{{Key: "amount", Value: "2500.00"}, {Key: "to", Value: "bob"}}, 0},
		{`{"a":1,"b":{"c":2},"d":true,"e":null,"f":"x"}`, 2, []Field{{Key: "a", Value: "1"}, {Key: "d", Value: "true"}}, 3},
		{`[1,2]`, 4, []Field{{Value: "[1,2]"}}, 0},
		{strings.Repeat("é", 50), 4, []Field{{Value: strings.Repeat("é", 40)}}, 20},
		// A long key or value is cut, and what is left out counted.
		{`{"memo":"` + strings.Repeat("x", 900_000) + `","` + strings.Repeat("k", 100) + `":1}`, 4,
			[]Field{{Key: "memo", Value: strings.Repeat("x", 80), Cut: 900_000 - 80}, {Key: strings.Repeat("k", 80), KeyCut: 20, Value: "1"}}, 0},
	}
	for _, tt := range tests {
		got, more := Summary(tt.in, tt.n)
		if !cmp.Equal(got, tt.want) || more != tt.more {
			t.Errorf("Summary(%q, %d) = %v, %d more; want %v, %d more", tt.in, tt.n, got, more, tt.want, tt.more)
		}
	}
}
