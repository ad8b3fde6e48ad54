package payload

import (
	"strconv"
	"strings"
	"time"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// Kind is what happened at a path.
type Kind string

// The kinds of change.
const (
	Added   Kind = "added"
	Removed Kind = "removed"
	Changed Kind = "changed"
)

// Change is one difference between two payloads.
type Change struct {
	Path     string // where: "amount", "items[0].sku", `["odd key"]`; "" for the whole payload
	Kind     Kind
	Old, New string // the values as compact JSON (or, for text, the text); "" when absent
	// Edits, for two long strings (or two payloads that are not JSON),
	// is the change within them, so a reader sees the few characters that
	// differ in a long text.
	Edits []Edit
}

// Edit is a run of text kept, deleted or inserted.
type Edit struct {
	Op   EditOp
	Text string
}

// EditOp says what an Edit does.
type EditOp string

// The edit operations.
const (
	Same   EditOp = "same"
	Delete EditOp = "delete"
	Insert EditOp = "insert"
)

// Diff is the comparison of an earlier payload with a later one.
type Diff struct {
	Identical bool // byte for byte
	JSON      bool // both are JSON, compared as values
	// FormattingOnly: equal as JSON values, different as bytes (spacing,
	// key order, escapes or how a number is written). The gate hashes
	// bytes, so such payloads are still different requests.
	FormattingOnly bool
	Changes        []Change
}

// longText is the length from which two differing strings are also
// compared within.
const longText = 40

// Compare compares old with new. Payloads that are both JSON are compared
// as values, path by path: members added, removed or changed, objects and
// arrays walked (arrays by position), numbers by value. Anything else is
// compared as text.
func Compare(old, new string) Diff {
	if old == new {
		return Diff{Identical: true, JSON: isJSON(old)}
	}
	a, okA := parse(old)
	b, okB := parse(new)
	if !okA || !okB {
		return Diff{Changes: []Change{{Kind: Changed, Old: old, New: new, Edits: edits(old, new)}}}
	}
	d := Diff{JSON: true}
	d.Changes = compare(a, b, "", d.Changes)
	d.FormattingOnly = len(d.Changes) == 0
	return d
}

func isJSON(s string) bool {
	_, ok := parse(s)
	return ok
}

func compare(a, b *node, path string, out []Change) []Change {
	switch {
	case a.kind != b.kind:
		return append(out, change(path, a, b))
	case a.kind == '{':
		for i, k := range a.keys {
			j := index(b.keys, k)
			if j < 0 {
				out = append(out, Change{Path: member(path, k), Kind: Removed, Old: string(a.vals[i].compact(nil))})
				continue
			}
			out = compare(a.vals[i], b.vals[j], member(path, k), out)
		}
		for j, k := range b.keys {
			if index(a.keys, k) < 0 {
				out = append(out, Change{Path: member(path, k), Kind: Added, New: string(b.vals[j].compact(nil))})
			}
		}
		return out
	case a.kind == '[':
		for i := range max(len(a.vals), len(b.vals)) {
			p := path + "[" + strconv.Itoa(i) + "]"
			switch {
			case i >= len(b.vals):
				out = append(out, Change{Path: p, Kind: Removed, Old: string(a.vals[i].compact(nil))})
			case i >= len(a.vals):
				out = append(out, Change{Path: p, Kind: Added, New: string(b.vals[i].compact(nil))})
			default:
				out = compare(a.vals[i], b.vals[i], p, out)
			}
		}
		return out
	case a.kind == '0' && number(a.text) == number(b.text):
		return out
	case a.text != b.text:
		c := change(path, a, b)
		if a.kind == '"' && max(len(a.text), len(b.text)) >= longText {
			c.Edits = edits(a.text, b.text)
		}
		return append(out, c)
	}
	return out
}

func change(path string, a, b *node) Change {
	return Change{Path: path, Kind: Changed, Old: string(a.compact(nil)), New: string(b.compact(nil))}
}

func index(keys []string, k string) int {
	for i, x := range keys {
		if x == k {
			return i
		}
	}
	return -1
}

// member is the path of member k of the object at path: .k for a plain
// name, ["k"] for any other.
func member(path, k string) string {
	plain := k != ""
	for i, r := range k {
		if !(r == '_' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			plain = false
			break
		}
	}
	switch {
	case !plain:
		return path + "[" + strconv.Quote(k) + "]"
	case path == "":
		return k
	}
	return path + "." + k
}

// number writes a JSON number in one form per value: sign, significant
// digits and exponent, so that 1, 1.0, 10e-1 and 0.1e1 are one number. It
// does no arithmetic on the exponent's size, which the payload controls.
func number(raw string) string {
	sign := ""
	if strings.HasPrefix(raw, "-") {
		sign, raw = "-", raw[1:]
	}
	mant, exp, _ := strings.Cut(strings.ToLower(raw), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	digits := whole + frac
	e, err := strconv.ParseInt(exp, 10, 64)
	if exp != "" && (err != nil || e > 1<<62 || e < -1<<62) {
		return sign + raw // an exponent too large to shift safely: compare as written
	}
	e += int64(len(whole))
	trimmed := strings.TrimLeft(digits, "0")
	e -= int64(len(digits) - len(trimmed))
	trimmed = strings.TrimRight(trimmed, "0")
	if trimmed == "" {
		return "0"
	}
	return sign + "0." + trimmed + "e" + strconv.FormatInt(e, 10)
}

// edits is the change within a text, cleaned up to read as words.
func edits(a, b string) []Edit {
	dmp := diffmatchpatch.New()
	// Bounded, so a pair of 1 MiB texts cannot hold up a page: past the
	// bound the diff is coarser, never wrong.
	dmp.DiffTimeout = 200 * time.Millisecond
	ds := dmp.DiffCleanupSemantic(dmp.DiffMain(a, b, len(a)+len(b) > 64<<10))
	out := make([]Edit, 0, len(ds))
	for _, d := range ds {
		op := Same
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			op = Delete
		case diffmatchpatch.DiffInsert:
			op = Insert
		}
		out = append(out, Edit{Op: op, Text: d.Text})
	}
	return out
}
