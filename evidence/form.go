package evidence

import (
	"slices"
	"strings"
)

// The texts the server signs — receipts, passkey ballots, export heads,
// the notes of its own sagas' entries and runners' retirements — share
// one grammar: a header line naming the kind of text and its version,
// then one "key: value" line a field, in the order the kind's Form lists
// its keys, each key at most once, every line ending in "\n". Form is
// that grammar's one encoder and decoder; testdata/signed-texts.json
// holds a vector of every kind.

// Form is one kind of signed text.
type Form struct {
	Header string
	// Keys are the keys its lines may have, in the order they are
	// written.
	Keys []string
	// Required are the keys every text of the kind has.
	Required []string
}

// Field is one "key: value" line of a signed text.
type Field struct {
	Key, Value string
}

// Fields are a signed text's lines, in order.
type Fields []Field

// Get returns the value of key k, and whether the text has it.
func (fs Fields) Get(k string) (string, bool) {
	for _, f := range fs {
		if f.Key == k {
			return f.Value, true
		}
	}
	return "", false
}

// Encode writes fields as a text of the form: the header, then each
// field as "key: value", each line ending in "\n". The writers hand it
// the form's keys in order and values of one line (ids, names, hashes,
// times and reasons are); a line break in a value is written as a
// space all the same, so that no value adds a line, and a text so
// written verifies against nothing.
func (f Form) Encode(fields ...Field) string {
	var b strings.Builder
	b.WriteString(f.Header + "\n")
	for _, l := range fields {
		b.WriteString(l.Key + ": " + oneLine(l.Value) + "\n")
	}
	return b.String()
}

// Decode reads a text of the form, strictly: the header line, then only
// lines of the form's keys, each at most once and in the form's order,
// the required ones all there, and a line break ending the text. It
// returns an *Error saying what is wrong otherwise: Decode(Encode(fs))
// is fs for the fields the writers hand Encode, and what Decode reads,
// Encode writes again byte for byte.
func (f Form) Decode(text string) (Fields, error) {
	body, ok := strings.CutSuffix(text, "\n")
	if !ok {
		return nil, errorf("it does not end with a line break")
	}
	lines := strings.Split(body, "\n")
	if lines[0] != f.Header {
		return nil, errorf("no %s header", f.Header)
	}
	var fs Fields
	last := -1
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ": ")
		i := slices.Index(f.Keys, k)
		switch {
		case !ok:
			return nil, errorf("line %q is not key: value", l)
		case i < 0:
			return nil, errorf("unknown key %q", k)
		case i == last:
			return nil, errorf("key %q twice", k)
		case i < last:
			return nil, errorf("key %q after %q", k, f.Keys[last])
		case strings.ContainsRune(v, '\r'):
			return nil, errorf("key %q's value holds a line break", k)
		}
		last = i
		fs = append(fs, Field{k, v})
	}
	for _, k := range f.Required {
		if _, ok := fs.Get(k); !ok {
			return nil, errorf("no %s", k)
		}
	}
	return fs, nil
}

// oneLine replaces line breaks, which would start another line.
func oneLine(v string) string {
	if !strings.ContainsAny(v, "\r\n") {
		return v
	}
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
}
