package evidence

import (
	"fmt"
	"strconv"
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

// headForm is the grammar of a head's text.
var headForm = Form{Header: "sagacity saga head v1", Keys: []string{"saga", "seq", "hash", "time"},
	Required: []string{"saga", "seq", "hash", "time"}}

// Text is the head as a note's text (headForm).
func (h Head) Text() string {
	return headForm.Encode(Field{"saga", h.SagaID}, Field{"seq", strconv.FormatInt(h.Seq, 10)}, Field{"hash", h.Hash},
		Field{"time", h.Time.UTC().Format(TimeLayout)})
}

// OpenHead checks a signed head with the verifier and reads it. An *Error
// when it is not a note the key signed, or not a head.
func OpenHead(signed string, v note.Verifier) (Head, error) {
	n, err := note.Open([]byte(signed), note.VerifierList(v))
	if err != nil {
		return Head{}, &Error{Msg: "the export's head is not signed by " + v.Name(), Err: err}
	}
	fs, err := headForm.Decode(n.Text)
	if err != nil {
		return Head{}, errorf("the export's head is not a %s: %s", headForm.Header, Message(err))
	}
	var h Head
	for _, f := range fs {
		switch f.Key {
		case "saga":
			h.SagaID = f.Value
		case "seq":
			h.Seq, err = strconv.ParseInt(f.Value, 10, 64)
		case "hash":
			h.Hash = f.Value
		case "time":
			h.Time, err = time.Parse(time.RFC3339Nano, f.Value)
		}
		if err != nil {
			return Head{}, errorf("the export's head has a bad %s", f.Key)
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
