package evidence

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/wire"
)

// TimeLayout is how journal exports write timestamps: RFC 3339, UTC, with
// the six fractional digits the journal keeps.
const TimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// Proofs prove an export's entries are leaves of the global log at
// TreeSize: Of[i] is entries[i]'s inclusion proof, nil for an entry the
// log had not reached at that size. Head is the server's signed head of
// the saga as it exported it (see Head), written as the export's last
// line. Policies are the entries of PolicySaga that hold the approval
// policies the saga's requests pin, each once, and Passkeys the entries
// of PasskeySaga that enrol and remove the passkeys its votes were signed
// with, and SignIns the entries of SignInSaga that journal the sign-ins
// its decisions and those passkeys' enrolments name, with the provider
// keys that verify them, all proved at the same size: with them an
// auditor checks offline that every request met the rule in force when it
// was made, that each passkey vote is the voter's own, and that the
// identity provider signed each decider's sign-in.
type Proofs struct {
	TreeSize                    int64
	Of                          [][][]byte
	Head                        string
	Policies, Passkeys, SignIns Attached
	// Delegations are the entries of DelegationSaga that record the
	// delegations its delegated votes stand on, and their revocations.
	Delegations Attached
}

// Attached are entries of one of the server's own sagas that an export's
// checks rest on, each with its inclusion proof: Of[i] proves Entries[i].
type Attached struct {
	Entries []Entry
	Of      [][][]byte
}

// attachments are the lines an export with proofs adds after its
// entries, one object of the key a line, and what each holds.
var attachments = []struct {
	key, saga string
	tools     []string
	of        func(*Proofs) *Attached
	lines     func(*wire.Export) *[]wire.Entry
	line      func(wire.Entry) any
}{
	{"policy", PolicySaga, []string{PolicyTool}, func(p *Proofs) *Attached { return &p.Policies },
		func(x *wire.Export) *[]wire.Entry { return &x.Policies }, func(e wire.Entry) any { return wire.ExportPolicy{Policy: e} }},
	{"passkey", PasskeySaga, []string{PasskeyEnrolled, PasskeyRemoved}, func(p *Proofs) *Attached { return &p.Passkeys },
		func(x *wire.Export) *[]wire.Entry { return &x.Passkeys }, func(e wire.Entry) any { return wire.ExportPasskey{Passkey: e} }},
	{"signIn", SignInSaga, []string{ProviderKeyTool, SignedInTool}, func(p *Proofs) *Attached { return &p.SignIns },
		func(x *wire.Export) *[]wire.Entry { return &x.SignIns }, func(e wire.Entry) any { return wire.ExportSignIn{SignIn: e} }},
	{"delegation", DelegationSaga, []string{Delegated, DelegationRevoked}, func(p *Proofs) *Attached { return &p.Delegations },
		func(x *wire.Export) *[]wire.Entry { return &x.Delegations },
		func(e wire.Entry) any { return wire.ExportDelegation{Delegation: e} }},
}

// WriteNDJSON writes entries as newline-delimited JSON, one object a line
// with the keys sagaId, seq, toolName, phase, input, payload, timestamp and
// hash; with proofs, each entry they cover adds leaf, treeSize and proof,
// a line {"policy": …} follows the entries for each of their policies,
// a line {"passkey": …} for each of their passkeys' entries and a line
// {"signIn": …} for each of their sign-ins' entries, and a last
// line {"head": …} carries their signed head (ExportOf's lines, in
// order). A real JSON encoder escapes every string.
func WriteNDJSON(w io.Writer, entries []Entry, proofs *Proofs) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	x := ExportOf(entries, proofs)
	for _, l := range x.Entries {
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	for _, a := range attachments {
		for _, l := range *a.lines(&x) {
			if err := enc.Encode(a.line(l)); err != nil {
				return err
			}
		}
	}
	if x.Head != "" {
		return enc.Encode(wire.ExportHead{Head: x.Head})
	}
	return nil
}

// ExportOf is entries, with proofs when they have them, as an export's
// lines in the API's shapes: what the Go client reads of an export, and
// ReadExport reads back.
func ExportOf(entries []Entry, proofs *Proofs) wire.Export {
	var x wire.Export
	for i, e := range entries {
		var proof [][]byte
		if proofs != nil {
			proof = proofs.Of[i]
		}
		x.Entries = append(x.Entries, wireEntry(e, proofs, proof))
	}
	if proofs == nil {
		return x
	}
	for _, a := range attachments {
		at, lines := a.of(proofs), a.lines(&x)
		for i, e := range at.Entries {
			*lines = append(*lines, wireEntry(e, proofs, at.Of[i]))
		}
	}
	x.Head = proofs.Head
	return x
}

// wireEntry is e as an export writes it, with its leaf, the proofs' tree
// size and its proof when it has one.
func wireEntry(e Entry, proofs *Proofs, proof [][]byte) wire.Entry {
	l := wire.Entry{SagaID: e.SagaID, Seq: e.Seq, ToolName: e.ToolName, Phase: string(e.Phase),
		Input: e.Input, Payload: e.Payload, Timestamp: e.Timestamp.UTC().Format(TimeLayout), Hash: e.Hash}
	if proof != nil {
		l.Leaf, l.TreeSize, l.Proof = &e.Leaf, &proofs.TreeSize, &proof
	}
	return l
}

// MaxNDJSONLine caps one line of an export read by ReadNDJSON.
const MaxNDJSONLine = 64 << 20

// ReadNDJSON parses a journal export written by WriteNDJSON, and its
// proofs, policy, passkey and sign-in lines and head when it carries them (nil
// when not). Blank lines are skipped. It returns an *Error naming
// the line for anything that is not exactly that format: a missing or
// unknown key, a wrong type, a timestamp that is not RFC 3339, an unknown
// phase, proofs against different sizes, a policy, passkey or sign-in line that is
// not an EXECUTED entry of its saga's tools, holds a seq already read,
// comes before an entry or in an export without proofs, a head that is
// not the last line, or trailing data.
func ReadNDJSON(r io.Reader) ([]Entry, *Proofs, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxNDJSONLine)
	x := newExportReader()
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if x.head != "" {
			return nil, nil, errorf("line %d: after the export's head", n)
		}
		if h, ok := parseHead(line); ok {
			if x.head = h; x.head == "" {
				return nil, nil, errorf("line %d: an empty head", n)
			}
			continue
		}
		kind := -1
		for i, a := range attachments {
			if v, ok := wrapped(line, a.key); ok {
				kind, line = i, v
			}
		}
		if err := x.add(n, kind, line); err != nil {
			return nil, nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, &Error{Msg: fmt.Sprintf("reading export: %v", err), Err: err}
	}
	return x.done()
}

// ReadExport reads an export's lines, as the Go client holds them (what
// ExportOf writes), as ReadNDJSON reads the export they are, numbering
// the lines as it would: the entries, the policy, passkey and sign-in
// lines, then the head. An *Error for anything ReadNDJSON refuses.
func ReadExport(e wire.Export) ([]Entry, *Proofs, error) {
	x, n := newExportReader(), 0
	for kind, lines := range append([][]wire.Entry{e.Entries}, e.Policies, e.Passkeys, e.SignIns, e.Delegations) {
		for _, l := range lines {
			n++
			b, err := json.Marshal(l)
			if err == nil {
				err = x.add(n, kind-1, b)
			}
			if err != nil {
				return nil, nil, err
			}
		}
	}
	x.head = e.Head
	return x.done()
}

// exportReader reads an export a line at a time.
type exportReader struct {
	entries       []Entry
	of            [][][]byte
	proofs        *Proofs
	attached      []Attached
	head          string
	firstAttached int // the line of the first policy, passkey or sign-in line
}

func newExportReader() *exportReader {
	return &exportReader{attached: make([]Attached, len(attachments))}
}

// add reads line n, the entry of an entry line (kind -1) or of a line of
// attachments[kind], which come after the entries. An *Error naming the
// line otherwise.
func (x *exportReader) add(n, kind int, line []byte) error {
	if kind < 0 && x.firstAttached != 0 {
		return errorf("line %d: an entry after the export's policy, passkey and sign-in lines", n)
	}
	e, l, err := parseLine(line)
	if err == nil && kind >= 0 {
		err = attachedLine(e, kind, x.attached[kind].Entries)
	}
	if err == nil && l.TreeSize != nil {
		if x.proofs == nil {
			x.proofs = &Proofs{TreeSize: *l.TreeSize}
		} else if *l.TreeSize != x.proofs.TreeSize {
			err = fmt.Errorf("proof against tree size %d, where earlier lines' are against %d", *l.TreeSize, x.proofs.TreeSize)
		}
	}
	if err != nil {
		return errorf("line %d: %v", n, err)
	}
	var p [][]byte
	if l.Proof != nil {
		p = *l.Proof
	}
	if kind >= 0 {
		if x.firstAttached == 0 {
			x.firstAttached = n
		}
		x.attached[kind].Entries, x.attached[kind].Of = append(x.attached[kind].Entries, e), append(x.attached[kind].Of, p)
	} else {
		x.entries, x.of = append(x.entries, e), append(x.of, p)
	}
	return nil
}

// done returns what was read, once it is a whole export.
func (x *exportReader) done() ([]Entry, *Proofs, error) {
	switch {
	case x.head != "" && x.proofs == nil:
		return nil, nil, errorf("the export has a head but no proofs")
	case x.firstAttached != 0 && x.proofs == nil:
		return nil, nil, errorf("line %d: a policy, passkey or sign-in line in an export without proofs", x.firstAttached)
	case x.proofs != nil:
		x.proofs.Of, x.proofs.Head = x.of, x.head
		for i, a := range attachments {
			*a.of(x.proofs) = x.attached[i]
		}
	}
	return x.entries, x.proofs, nil
}

// wrapped reads a line that is an object of the one key k, as the head
// and the policy lines are, and returns k's value; ok is false for any
// other line.
func wrapped(line []byte, k string) (json.RawMessage, bool) {
	var keys map[string]json.RawMessage
	if json.Unmarshal(line, &keys) != nil || len(keys) != 1 || keys[k] == nil {
		return nil, false
	}
	return keys[k], true
}

// parseHead reads a line {"head": "<signed note>"}: ok is false for any
// other line.
func parseHead(line []byte) (string, bool) {
	v, ok := wrapped(line, "head")
	var h string
	if !ok || json.Unmarshal(v, &h) != nil {
		return "", false
	}
	return h, true
}

// attachedLine checks the entry of a line of attachments[kind]: an
// EXECUTED entry of its saga's tools, not among those read before.
func attachedLine(e Entry, kind int, read []Entry) error {
	a := attachments[kind]
	switch {
	case e.SagaID != a.saga || !slices.Contains(a.tools, e.ToolName) || e.Phase != PhaseExecuted:
		return fmt.Errorf("a %s line must hold an entry of saga %s, tool %s, phase %s; not of saga %q, tool %q, phase %s",
			a.key, a.saga, strings.Join(a.tools, " or "), PhaseExecuted, e.SagaID, e.ToolName, e.Phase)
	case slices.ContainsFunc(read, func(p Entry) bool { return p.Seq == e.Seq }):
		return fmt.Errorf("the %s line of seq=%d again", a.key, e.Seq)
	}
	return nil
}

func parseLine(line []byte) (Entry, wire.Entry, error) {
	var l wire.Entry
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(line, &keys); err != nil {
		return Entry{}, l, err
	}
	for _, k := range []string{"sagaId", "seq", "toolName", "phase", "input", "payload", "timestamp", "hash"} {
		if _, ok := keys[k]; !ok {
			return Entry{}, l, fmt.Errorf("missing key %q", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Entry{}, l, err
	}
	t, err := time.Parse(time.RFC3339Nano, l.Timestamp)
	if err != nil {
		return Entry{}, l, fmt.Errorf("timestamp: %w", err)
	}
	if !slices.Contains(Phases, Phase(l.Phase)) {
		return Entry{}, l, fmt.Errorf("unknown phase %q", l.Phase)
	}
	e := Entry{SagaID: l.SagaID, Seq: l.Seq, ToolName: l.ToolName, Phase: Phase(l.Phase), Input: l.Input,
		Payload: l.Payload, Timestamp: t.UTC(), Hash: l.Hash, Leaf: -1}
	switch proved := l.Leaf != nil && l.TreeSize != nil && l.Proof != nil; {
	case !proved && (l.Leaf != nil || l.TreeSize != nil || l.Proof != nil):
		return Entry{}, l, errors.New("leaf, treeSize and proof come together")
	case proved && (*l.Leaf < 0 || *l.Leaf >= *l.TreeSize):
		return Entry{}, l, fmt.Errorf("leaf %d is not in a tree of size %d", *l.Leaf, *l.TreeSize)
	case proved:
		e.Leaf = *l.Leaf
	}
	return e, l, nil
}
