package engine

import (
	"strings"
	"testing"
)

// TestAmbiguous: JSON that parsers read differently is refused; anything
// else, JSON or not, is taken as it is.
func TestAmbiguous(t *testing.T) {
	padded := `{"amount":"1.00","to":"alice (invoice 2291, monthly office supplies)"` + strings.Repeat("\n", 60) + `,"amount":"250000"}`
	tests := []struct {
		name, input, want string // want: "" when taken
	}{
		{"plain", `{"amount":"100","to":"alice"}`, ""},
		{"nested, names repeated across objects", `{"a":{"id":1},"b":{"id":2},"c":[{"id":3},{"id":4}]}`, ""},
		{"not JSON", `amount=100&to=alice`, ""},
		{"two JSON values", `{"amount":"1"} {"amount":"2"}`, ""},
		{"a string", `"hello"`, ""},
		{"escapes that are fine", `{"to":"al\u0069ce \ud83d\ude00 \n"}`, ""},
		{"a control character escaped", `{"to":"\u0007"}`, ""},
		{"a name twice", `{"amount":"1","amount":"2"}`, `duplicate object member name "amount"`},
		{"a name twice, far apart", padded, `duplicate object member name "amount"`},
		{"a name escaped", `{"amount":"1","\u0061mount":"2"}`, `duplicate object member name "amount"`},
		{"a name in another case", `{"amount":"1","AMOUNT":"2"}`, `the member names "amount" and "AMOUNT" of one object match`},
		{"a name folded (Kelvin sign)", `{"kind":"a","\u212aind":"b"}`, `the member names "kind" and "\u212aind" of one object match`},
		{"a name twice, nested", `{"pay":{"to":"a","to":"b"}}`, `duplicate object member name "to"`},
		{"a lone surrogate", `{"to":"\ud800"}`, "invalid surrogate pair"},
		{"a lone low surrogate", `{"to":"\udc00x"}`, "invalid surrogate pair"},
		{"a NUL escaped", `{"to":"alice\u0000bob"}`, "a string holds a NUL character"},
		{"a NUL in a name", `{"to\u0000":"alice"}`, "a string holds a NUL character"},
	}
	for _, tt := range tests {
		err := ambiguous(tt.input)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: ambiguous(%q) = %v, want it taken", tt.name, tt.input, err)
		case tt.want != "" && (!IsKind(err, Invalid) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: ambiguous(%q) = %v, want Invalid naming %q", tt.name, tt.input, err, tt.want)
		}
	}
}

// TestNotReserved: an agent's saga id is refused when a person would read
// it as one of the server's own (sagacity:…), whatever its case, a colon
// that only looks like one, an escaped colon or invisible characters;
// ids that merely mention the word are taken.
func TestNotReserved(t *testing.T) {
	for _, tt := range []struct {
		id       string
		reserved bool
	}{
		{"sagacity:passkeys", true},
		{"sagacity:anything", true},
		{"Sagacity:passkeys", true},
		{"SAGACITY:policies", true},
		{"ſagacity:passkeys", true},       // U+017F LATIN SMALL LETTER LONG S folds to s
		{"ｓａｇａｃｉｔｙ:passkeys", true},       // fullwidth letters
		{"sagacity\uff1apasskeys", true},  // FULLWIDTH COLON
		{"sagacity\u2236passkeys", true},  // RATIO
		{"sagacity\ua789passkeys", true},  // MODIFIER LETTER COLON
		{"sagacity\ufe55passkeys", true},  // SMALL COLON
		{"sagacity\ufe13passkeys", true},  // PRESENTATION FORM FOR VERTICAL COLON
		{"sagacity\u02d0passkeys", true},  // MODIFIER LETTER TRIANGULAR COLON
		{"sagacity\u0589passkeys", true},  // ARMENIAN FULL STOP
		{"sagacity%3Apasskeys", true},     // a percent-encoded colon
		{"sagacity%3apasskeys", true},     //   in lower case
		{"sagacity%253Apasskeys", true},   //   encoded twice
		{"%73agacity:passkeys", true},     // a letter encoded
		{"saga\u200bcity:passkeys", true}, // a zero-width space
		{"\u202esagacity:passkeys", true}, // a right-to-left override before it
		{"sagacity\u00ad:passkeys", true}, // a soft hyphen
		{"sagacity", false},               // no colon
		{"sagacity-passkeys", false},      // another separator
		{"sagacity passkeys", false},      //
		{"my-sagacity:passkeys", false},   // not at the start
		{"sagacity%3", false},             // an escape cut short
		{"sagacity%zz:", false},           // no escape at all
		{"order-42", false},               //
		{"sagacity%3Bx", false},           // an escaped semicolon
		{"sagacityːpasskeys", true},       // U+02D0 typed as itself
		{"sagacity\ufe30passkeys", true},  // PRESENTATION FORM FOR VERTICAL TWO DOT LEADER
		{"sagacitу:passkeys", false},      // a Cyrillic у: a letter look-alike, not in the rule
	} {
		err := notReserved(tt.id)
		if got := err != nil; got != tt.reserved {
			t.Errorf("notReserved(%+q) = %v; want reserved %v", tt.id, err, tt.reserved)
		}
		if err != nil && !IsKind(err, Invalid) {
			t.Errorf("notReserved(%+q) = %v; want Invalid", tt.id, err)
		}
	}
}
