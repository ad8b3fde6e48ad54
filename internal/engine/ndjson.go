package engine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"
)

// TimeLayout is how journal exports write timestamps: RFC 3339, UTC, with
// the six fractional digits the journal keeps.
const TimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// ndjsonLine is one line of a journal export (SPEC §5).
type ndjsonLine struct {
	SagaID    string `json:"sagaId"`
	Seq       int64  `json:"seq"`
	ToolName  string `json:"toolName"`
	Phase     Phase  `json:"phase"`
	Input     string `json:"input"`
	Payload   string `json:"payload"`
	Timestamp string `json:"timestamp"`
	Hash      string `json:"hash"`
}

// WriteNDJSON writes entries as newline-delimited JSON, one object a line
// with the keys sagaId, seq, toolName, phase, input, payload, timestamp and
// hash. A real JSON encoder escapes every string.
func WriteNDJSON(w io.Writer, entries []Entry) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, e := range entries {
		if err := enc.Encode(ndjsonLine{SagaID: e.SagaID, Seq: e.Seq, ToolName: e.ToolName, Phase: e.Phase,
			Input: e.Input, Payload: e.Payload, Timestamp: e.Timestamp.UTC().Format(TimeLayout), Hash: e.Hash}); err != nil {
			return err
		}
	}
	return nil
}

// MaxNDJSONLine caps one line of an export read by ReadNDJSON.
const MaxNDJSONLine = 64 << 20

// ReadNDJSON parses a journal export written by WriteNDJSON. Blank lines
// are skipped. It returns an Invalid error naming the line for anything
// that is not exactly that format: a missing or unknown key, a wrong type,
// a timestamp that is not RFC 3339, an unknown phase, or trailing data.
func ReadNDJSON(r io.Reader) ([]Entry, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxNDJSONLine)
	var entries []Entry
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		e, err := parseLine(line)
		if err != nil {
			return nil, &Error{Kind: Invalid, Msg: fmt.Sprintf("line %d: %v", n, err)}
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, &Error{Kind: Invalid, Msg: fmt.Sprintf("reading export: %v", err), Err: err}
	}
	return entries, nil
}

func parseLine(line []byte) (Entry, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(line, &keys); err != nil {
		return Entry{}, err
	}
	for _, k := range []string{"sagaId", "seq", "toolName", "phase", "input", "payload", "timestamp", "hash"} {
		if _, ok := keys[k]; !ok {
			return Entry{}, fmt.Errorf("missing key %q", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var l ndjsonLine
	if err := dec.Decode(&l); err != nil {
		return Entry{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, l.Timestamp)
	if err != nil {
		return Entry{}, fmt.Errorf("timestamp: %w", err)
	}
	if !slices.Contains(Phases, l.Phase) {
		return Entry{}, fmt.Errorf("unknown phase %q", l.Phase)
	}
	return Entry{SagaID: l.SagaID, Seq: l.Seq, ToolName: l.ToolName, Phase: l.Phase, Input: l.Input,
		Payload: l.Payload, Timestamp: t.UTC(), Hash: l.Hash}, nil
}
