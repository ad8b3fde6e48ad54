package payload

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/runenames"
)

// Flag is why a character is pointed out to a reader.
type Flag string

// The flags.
const (
	Bidi      Flag = "bidi control"        // reorders what is displayed around it
	Invisible Flag = "invisible character" // zero-width and other format characters
	Control   Flag = "control character"   // C0/C1 controls other than tab and newline
	Space     Flag = "unusual space"       // a space that is not U+0020
	LookAlike Flag = "non-ASCII in a key"  // a key that may look like another
	Mixed     Flag = "mixed scripts"       // letters of several scripts in one value
	NotUTF8   Flag = "invalid UTF-8"       // a byte that is not a character
)

// flag says whether r is hidden or misleading when displayed.
func flag(r rune) (Flag, bool) {
	switch {
	case r == '\n' || r == '\t' || r == '\r':
		return "", false
	case r == 0x061C || r == 0x200E || r == 0x200F || 0x202A <= r && r <= 0x202E || 0x2066 <= r && r <= 0x2069:
		return Bidi, true
	case unicode.IsControl(r):
		return Control, true
	case unicode.In(r, unicode.Cf) || r == 0x034F || r == 0x115F || r == 0x1160 || r == 0x3164 || r == 0xFFA0 || r == 0x180E:
		return Invisible, true
	case r != ' ' && unicode.IsSpace(r):
		return Space, true
	}
	return "", false
}

// Finding is one thing a reader should know about a payload.
type Finding struct {
	Flag   Flag
	Detail string // which character, where
}

// maxFindings caps the list; a payload full of them says enough in 20.
const maxFindings = 20

// Inspect lists what in s a reader cannot see or could misread: bidi
// controls, invisible, control and unusual space characters anywhere,
// and, when s is JSON, keys with non-ASCII characters and values mixing
// the letters of several scripts.
func Inspect(s string) []Finding {
	var out []Finding
	add := func(f Flag, format string, args ...any) {
		if len(out) < maxFindings {
			out = append(out, Finding{f, fmt.Sprintf(format, args...)})
		}
	}
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") {
			add(NotUTF8, "byte %#x at byte %d", s[i], i)
		} else if f, ok := flag(r); ok {
			add(f, "%s at byte %d", name(r), i)
		}
	}
	if n, ok := parse(s); ok {
		n.walk("", func(path string, n *node) {
			for _, k := range n.keys {
				if r, ok := nonASCII(k); ok {
					add(LookAlike, "key %s contains %s", member(path, k), name(r))
				}
			}
			if n.kind == '"' && mixed(n.text) {
				add(Mixed, "%s mixes the letters of several scripts", or(path, "the payload"))
			}
		})
	}
	return out
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// walk calls fn for n and every value inside it, with its path.
func (n *node) walk(path string, fn func(string, *node)) {
	fn(path, n)
	for i, v := range n.vals {
		if n.kind == '{' {
			v.walk(member(path, n.keys[i]), fn)
		} else {
			v.walk(fmt.Sprintf("%s[%d]", path, i), fn)
		}
	}
}

func nonASCII(s string) (rune, bool) {
	for _, r := range s {
		if r > unicode.MaxASCII {
			return r, true
		}
	}
	return 0, false
}

// scripts whose letters are easily taken for each other.
var scripts = []*unicode.RangeTable{unicode.Latin, unicode.Cyrillic, unicode.Greek, unicode.Armenian, unicode.Cherokee}

// mixed reports whether s has letters of more than one of scripts.
func mixed(s string) bool {
	var seen *unicode.RangeTable
	for _, r := range s {
		if !unicode.IsLetter(r) {
			continue
		}
		for _, t := range scripts {
			if unicode.Is(t, r) {
				if seen != nil && seen != t {
					return true
				}
				seen = t
			}
		}
	}
	return false
}

// name is how a character is named to a reader: U+202E RIGHT-TO-LEFT OVERRIDE.
func name(r rune) string {
	if n := runenames.Name(r); n != "" && n != "<control>" {
		return fmt.Sprintf("U+%04X %s", r, n)
	}
	return fmt.Sprintf("U+%04X", r)
}

// Segment is a run of text to display: plain, or one flagged character
// shown as its code point so that it is seen and cannot act on what is
// displayed around it.
type Segment struct {
	Text string // the text, or for a flagged character its code point, "U+202E"
	Flag Flag   // "" for plain text
	Name string // for a flagged character, its name
}

// Reveal splits s for display, making every flagged character (see
// Inspect) visible in place. Plain text is returned as is, to be escaped
// by the template like any text.
func Reveal(s string) []Segment {
	var out []Segment
	start := 0
	for i, r := range s {
		f, ok := flag(r)
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") {
			f, ok = NotUTF8, true
		}
		if !ok {
			continue
		}
		if start < i {
			out = append(out, Segment{Text: s[start:i]})
		}
		size := utf8.RuneLen(r)
		if f == NotUTF8 {
			out = append(out, Segment{Text: fmt.Sprintf("\\x%02x", s[i]), Flag: f, Name: "a byte that is not a character"})
			size = 1
		} else {
			out = append(out, Segment{Text: fmt.Sprintf("U+%04X", r), Flag: f, Name: name(r)})
		}
		start = i + size
	}
	if start < len(s) {
		out = append(out, Segment{Text: s[start:]})
	}
	return out
}
