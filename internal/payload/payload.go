// Package payload shows a reviewer what a payload says: its JSON parsed
// exactly (no key twice, numbers as written), pretty-printed, compared with
// another payload path by path, and every character a reader cannot see or
// could misread flagged. What a reviewer reads must be what executes: the
// package never drops, reorders or truncates anything it is given.
package payload

import (
	"errors"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// node is a parsed JSON value. Object members keep their order.
type node struct {
	kind jsontext.Kind // '{', '[', '"', '0', 't', 'f' or 'n'
	text string        // a string's value, a number as written, or true/false/null
	keys []string      // an object's member names
	vals []*node       // an object's member values, or an array's elements
}

// parse reads s as exactly one JSON value: valid UTF-8, no duplicate
// member names, nothing after the value. ok is false for anything else.
func parse(s string) (n *node, ok bool) {
	dec := jsontext.NewDecoder(strings.NewReader(s))
	n, err := read(dec)
	if err != nil {
		return nil, false
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	return n, true
}

func read(dec *jsontext.Decoder) (*node, error) {
	switch k := dec.PeekKind(); k {
	case '0':
		v, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		return &node{kind: k, text: string(v)}, nil
	case '{', '[':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		n := &node{kind: k}
		for dec.PeekKind() != k+2 { // '}' is '{'+2 and ']' is '['+2
			if k == '{' {
				name, err := dec.ReadToken()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, name.String())
			}
			v, err := read(dec)
			if err != nil {
				return nil, err
			}
			n.vals = append(n.vals, v)
		}
		_, err := dec.ReadToken()
		return n, err
	default:
		t, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		return &node{kind: t.Kind(), text: t.String()}, nil
	}
}

// compact writes n as compact JSON.
func (n *node) compact(b []byte) []byte {
	switch n.kind {
	case '"':
		b, _ = jsontext.AppendQuote(b, n.text)
		return b
	case '{', '[':
		b = append(b, byte(n.kind))
		for i, v := range n.vals {
			if i > 0 {
				b = append(b, ',')
			}
			if n.kind == '{' {
				b, _ = jsontext.AppendQuote(b, n.keys[i])
				b = append(b, ':')
			}
			b = v.compact(b)
		}
		return append(b, byte(n.kind)+2)
	}
	return append(b, n.text...)
}

// pretty writes n indented by two spaces a level.
func (n *node) pretty(b []byte, depth int) []byte {
	if (n.kind != '{' && n.kind != '[') || len(n.vals) == 0 {
		return n.compact(b)
	}
	b = append(b, byte(n.kind))
	for i, v := range n.vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '\n')
		b = append(b, strings.Repeat("  ", depth+1)...)
		if n.kind == '{' {
			b, _ = jsontext.AppendQuote(b, n.keys[i])
			b = append(b, ": "...)
		}
		b = v.pretty(b, depth+1)
	}
	b = append(b, '\n')
	b = append(b, strings.Repeat("  ", depth)...)
	return append(b, byte(n.kind)+2)
}

// Pretty returns s pretty-printed when it is JSON (keys in their order,
// numbers as written, strings by their value, escaped only where JSON
// must), and ok false with s unchanged when it is not.
func Pretty(s string) (out string, ok bool) {
	n, ok := parse(s)
	if !ok {
		return s, false
	}
	return string(n.pretty(nil, 0)), true
}

// Field is one member of a payload's summary.
type Field struct {
	Key   string // "" for a payload that is not a JSON object
	Value string // a string's text, or any other value as compact JSON
	// KeyCut and Cut count the bytes of the key and the value a summary
	// leaves out: each shows at most summaryBytes.
	KeyCut, Cut int
}

// summaryBytes is the most of a key, a value or a payload that is not a
// JSON object a summary shows.
const summaryBytes = 80

// cut is s cut to at most n bytes, at a character, and how many bytes
// were left out.
func cut(s string, n int) (string, int) {
	at := min(len(s), n)
	for at < len(s) && !utf8.RuneStart(s[at]) {
		at--
	}
	return s[:at], len(s) - at
}

// Summary is a one-line view of a payload: the first n scalar members of
// a JSON object, in order, and how many members it leaves out; or, for
// anything else, the first 80 bytes (cut at a character) and how many
// bytes it leaves out. Keys and values are cut to 80 bytes too. What it
// leaves out is always counted, never hidden.
func Summary(s string, n int) (fields []Field, more int) {
	root, ok := parse(s)
	if !ok || root.kind != '{' {
		v, left := cut(s, summaryBytes)
		return []Field{{Value: v}}, left
	}
	for i, v := range root.vals {
		if len(fields) == n || v.kind == '{' || v.kind == '[' {
			more++
			continue
		}
		val := v.text
		if v.kind != '"' {
			val = string(v.compact(nil))
		}
		f := Field{}
		f.Key, f.KeyCut = cut(root.keys[i], summaryBytes)
		f.Value, f.Cut = cut(val, summaryBytes)
		fields = append(fields, f)
	}
	return fields, more
}
