package evidence

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// What the journal may name (a saga, a tool, a principal, a rule) and the
// reasons it keeps fit on one line of its payload, and of a signed text.

// MaxIDLen is the longest saga id or tool name, in bytes.
const MaxIDLen = 200

// MaxReasonLen caps decision and abort reasons, in bytes.
const MaxReasonLen = 1000

// CheckName checks a name the journal keeps (what says which: a saga id,
// a tool name, a principal id, a rule's name): non-empty, at most
// MaxIDLen bytes of UTF-8 without control characters. An *Error saying
// what is wrong otherwise.
func CheckName(what, s string) error {
	switch {
	case s == "":
		return errorf("%s is empty", what)
	case len(s) > MaxIDLen:
		return errorf("%s is longer than %d bytes", what, MaxIDLen)
	case !utf8.ValidString(s):
		return errorf("%s is not valid UTF-8", what)
	case strings.ContainsFunc(s, unicode.IsControl):
		return errorf("%s contains control characters", what)
	}
	return nil
}

// CleanLine makes any text one line fit for a reason or a payload line:
// control characters (line breaks among them) become spaces, invalid
// UTF-8 is replaced and the length is capped.
func CleanLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	for len(s) > MaxReasonLen {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}
