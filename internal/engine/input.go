package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json/jsontext"
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
