package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/text/unicode/norm"
)

// A tool reads its input with whatever JSON parser it has, and a reviewer
// reads it in the console. JSON that parsers read differently — a member
// name twice (Go's encoding/json and most others keep the last value, the
// console's exact parser refuses it), the same name escaped or in another
// case (encoding/json matches struct fields regardless of case), a lone
// surrogate (replaced by U+FFFD, or refused), a NUL character — would let
// a reviewer approve one thing and the tool do another. The gate refuses
// such input before anything is journaled. Text that is not JSON at all
// is shown byte for byte and is taken as it is.

// ambiguous says why input, which a lenient JSON parser reads, could be
// read two ways, as an Invalid error; nil when it is unambiguous or not
// JSON at all.
func ambiguous(input string) error {
	if !json.Valid([]byte(input)) {
		return nil
	}
	problem := ambiguity(input)
	if problem == "" {
		return nil
	}
	return Errorf(Invalid, "input is JSON that tools and reviewers could read differently: %s; send every member name once "+
		"(whatever its case or escaping), without NUL characters or lone surrogates", problem)
}

// ambiguity is what ambiguous says, or "".
func ambiguity(input string) string {
	dec := jsontext.NewDecoder(strings.NewReader(input))
	// Each open object's member names, folded as encoding/json matches
	// them to fields; nil for an open array.
	var names []map[string]string
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return ""
		}
		if err != nil {
			if se, ok := errors.AsType[*jsontext.SyntacticError](err); ok {
				return strings.TrimPrefix(se.Error(), "jsontext: ")
			}
			return err.Error()
		}
		switch tok.Kind() {
		case '{':
			names = append(names, map[string]string{})
		case '[':
			names = append(names, nil)
		case '}', ']':
			names = names[:len(names)-1]
		case '"':
			s := tok.String()
			if strings.IndexByte(s, 0) >= 0 {
				return fmt.Sprintf("a string holds a NUL character (before offset %d)", dec.InputOffset())
			}
			// A string read where a member name goes is one: an object's
			// length counts names and values, so it is odd just after one.
			if kind, n := dec.StackIndex(dec.StackDepth()); kind == '{' && n%2 == 1 {
				seen := names[len(names)-1]
				if other, dup := seen[fold(s)]; dup {
					return fmt.Sprintf("the member names %+q and %+q of one object match as a tool reads them (before offset %d)",
						other, s, dec.InputOffset())
				}
				seen[fold(s)] = s
			}
		}
	}
}

// readAs is s as a person reading it would take it, for comparing names
// that must not pass for one another: percent-escapes decoded (also when
// escaped twice), the characters Unicode lists as confusable with a
// colon made one, invisible formatting characters dropped, compatibility
// forms (fullwidth letters, the small and vertical colons) made plain by
// NFKC, and case folded. It is no name of its own: only compared.
func readAs(s string) string {
	return fold(norm.NFKC.String(strings.Map(func(r rune) rune {
		switch {
		case colonLike[r]:
			return ':'
		case unicode.Is(unicode.Cf, r):
			return -1
		}
		return r
	}, unescapePercent(s))))
}

// colonLike are the characters Unicode's confusables.txt maps to a colon
// (U+FE55 and U+FE13 are NFKC's).
var colonLike = map[rune]bool{
	0x02D0: true, 0x02F8: true, 0x0589: true, 0x05C3: true, 0x0703: true, 0x0704: true, 0x0903: true, 0x0A83: true,
	0x16EC: true, 0x1803: true, 0x1809: true, 0x205A: true, 0x2236: true, 0xA4FD: true, 0xA789: true, 0xFE30: true,
	0xFF1A: true,
}

// unescapePercent decodes every %XX of s, again until none is left.
func unescapePercent(s string) string {
	for strings.Contains(s, "%") {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
				i += 2
				continue
			}
			b.WriteByte(s[i])
		}
		if b.Len() == len(s) {
			return s
		}
		s = b.String()
	}
	return s
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// fold is s with each character replaced by the smallest of those simple
// case folding makes equal to it: two names fold alike exactly when
// strings.EqualFold holds.
func fold(s string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, s)
}
