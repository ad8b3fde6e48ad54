package evidence

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sample is a form for the codec's tests: a, then b or c, then d.
var sample = Form{Header: "sample text v1", Keys: []string{"a", "b", "c", "d"}, Required: []string{"a", "d"}}

// TestFormDecode: what Encode writes reads back as it was written, and
// anything else is refused, saying why.
func TestFormDecode(t *testing.T) {
	good := "sample text v1\na: 1\nc: x: y\nd: \n"
	fs, err := sample.Decode(good)
	if want := (Fields{{"a", "1"}, {"c", "x: y"}, {"d", ""}}); err != nil || !cmp.Equal(fs, want) {
		t.Fatalf("Decode(%q) = %v, %v; want %v", good, fs, err, want)
	}
	if got := sample.Encode(fs...); got != good {
		t.Errorf("Encode(%v) = %q, want %q", fs, got, good)
	}
	for _, tt := range []struct{ name, text, want string }{
		{"empty", "", "it does not end with a line break"},
		{"no final line break", strings.TrimSuffix(good, "\n"), "it does not end with a line break"},
		{"another header", "sample text v2\na: 1\nd: 2\n", "no sample text v1 header"},
		{"a blank line", "sample text v1\na: 1\n\nd: 2\n", `line "" is not key: value`},
		{"no colon and space", "sample text v1\na:1\nd: 2\n", `line "a:1" is not key: value`},
		{"an unknown key", "sample text v1\na: 1\ne: 2\nd: 2\n", `unknown key "e"`},
		{"a key twice", "sample text v1\na: 1\na: 2\nd: 2\n", `key "a" twice`},
		{"out of order", "sample text v1\na: 1\nc: 2\nb: 2\nd: 2\n", `key "b" after "c"`},
		{"a required key missing", "sample text v1\na: 1\n", "no d"},
		{"a carriage return", "sample text v1\na: 1\r\nd: 2\n", `key "a"'s value holds a line break`},
	} {
		if fs, err := sample.Decode(tt.text); err == nil || Message(err) != tt.want {
			t.Errorf("%s: Decode(%q) = %v, %v; want the error %q", tt.name, tt.text, fs, err, tt.want)
		}
	}
}

// TestFormEncodeOneLine: no value adds a line, whatever it holds.
func TestFormEncodeOneLine(t *testing.T) {
	got := sample.Encode(Field{"a", "1\nb: injected"}, Field{"d", "x\r\ny"})
	if want := "sample text v1\na: 1 b: injected\nd: x  y\n"; got != want {
		t.Errorf("Encode(line breaks) = %q, want %q", got, want)
	}
}

// FuzzForm: whatever Decode reads, Encode writes again byte for byte,
// so a text has one reading.
func FuzzForm(f *testing.F) {
	f.Add("sample text v1\na: 1\nc: x: y\nd: \n")
	f.Add("sample text v1\na: 1\nb: \nc: 2\nd: 3\n")
	f.Add("sample text v1\na: 1\r\nd: 2\n")
	f.Fuzz(func(t *testing.T, text string) {
		fs, err := sample.Decode(text)
		if err != nil {
			return
		}
		if got := sample.Encode(fs...); got != text {
			t.Errorf("Encode(Decode(%q)) = %q", text, got)
		}
	})
}
