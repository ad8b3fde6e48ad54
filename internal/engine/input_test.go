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
