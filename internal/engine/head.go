package engine

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// A journal exported with its proofs ends with the server's signed
// statement of the saga's head as it exported it: the seq and hash of its
// last entry. An export whose tail was cut, or whose entries were
// rewritten and their proofs dropped, no longer ends where the server
// said it did, and `sagacity verify` says so without the server.

// Head is a saga's last entry as the server exported it.
type Head struct {
	SagaID string
	Seq    int64
	Hash   string
	Time   time.Time // when it was exported
}

// headHeader opens every head's text.
const headHeader = "sagacity saga head v1"

// Text is the head as a note's text: a header line, then one "key: value"
// line a field.
func (h Head) Text() string {
	return headHeader + "\nsaga: " + h.SagaID + "\nseq: " + strconv.FormatInt(h.Seq, 10) + "\nhash: " + h.Hash +
		"\ntime: " + h.Time.UTC().Format(TimeLayout) + "\n"
}

// OpenHead checks a signed head with the verifier and reads it. Invalid
// when it is not a note the key signed, or not a head.
func OpenHead(signed string, v note.Verifier) (Head, error) {
	n, err := note.Open([]byte(signed), note.VerifierList(v))
	if err != nil {
		return Head{}, &Error{Kind: Invalid, Msg: "the export's head is not signed by " + v.Name(), Err: err}
	}
	var h Head
	want := []string{"saga", "seq", "hash", "time"}
	lines := strings.Split(strings.TrimSuffix(n.Text, "\n"), "\n")
	if len(lines) != len(want)+1 || lines[0] != headHeader {
		return Head{}, Errorf(Invalid, "the export's head is not a %s", headHeader)
	}
	for i, l := range lines[1:] {
		v, ok := strings.CutPrefix(l, want[i]+": ")
		if !ok {
			return Head{}, Errorf(Invalid, "the export's head has %q where its %s goes", l, want[i])
		}
		switch want[i] {
		case "saga":
			h.SagaID = v
		case "seq":
			h.Seq, err = strconv.ParseInt(v, 10, 64)
		case "hash":
			h.Hash = v
		case "time":
			h.Time, err = time.Parse(time.RFC3339Nano, v)
		}
		if err != nil {
			return Head{}, Errorf(Invalid, "the export's head has a bad %s", want[i])
		}
	}
	return h, nil
}

// Ends says why entries (one saga's journal) do not end at h, or "".
func (h Head) Ends(entries []Entry) string {
	if len(entries) == 0 {
		return fmt.Sprintf("the export holds no entries, but the server exported saga %s up to seq=%d", h.SagaID, h.Seq)
	}
	last := entries[len(entries)-1]
	switch {
	case last.SagaID != h.SagaID:
		return fmt.Sprintf("the export's head is of saga %s, not %s", h.SagaID, last.SagaID)
	case last.Seq != h.Seq:
		return fmt.Sprintf("the export ends at seq=%d, but the server exported the saga up to seq=%d: entries were cut or added", last.Seq, h.Seq)
	case last.Hash != h.Hash:
		return fmt.Sprintf("the export's last entry, seq=%d, is not the one the server exported: its hash differs", last.Seq)
	}
	return ""
}

// head signs the head of a journal as exported now; "" for an empty one.
func (e *Engine) head(entries []Entry) (string, error) {
	if len(entries) == 0 {
		return "", nil
	}
	last := entries[len(entries)-1]
	return e.keys.Sign(Head{SagaID: last.SagaID, Seq: last.Seq, Hash: last.Hash, Time: Truncate(e.now())}.Text())
}
