package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
	"time"
)

// ZeroHash is the previous hash of every saga's first entry.
const ZeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Hash returns the entry hash of e chained on prev: SHA-256 over eight
// fields, each written as its UTF-8 byte length in decimal, a colon and the
// bytes, with nothing between fields. Field order: prev, sagaId, seq,
// toolName, phase, input, payload, timestamp (see CanonicalTime). The
// length prefixes make field boundaries unambiguous. The result is 64
// lowercase hex digits. e.Hash is ignored.
func Hash(prev string, e Entry) string {
	h := sha256.New()
	field(h, prev)
	field(h, e.SagaID)
	field(h, strconv.FormatInt(e.Seq, 10))
	field(h, e.ToolName)
	field(h, string(e.Phase))
	field(h, e.Input)
	field(h, e.Payload)
	field(h, CanonicalTime(e.Timestamp))
	return hex.EncodeToString(h.Sum(nil))
}

func field(h hash.Hash, s string) {
	h.Write(strconv.AppendInt(nil, int64(len(s)), 10))
	h.Write([]byte{':'})
	h.Write([]byte(s))
}

// CanonicalTime writes t as the hash chain does: UTC, truncated to
// microseconds, as "<unix seconds>.<6-digit microseconds>".
func CanonicalTime(t time.Time) string {
	t = Truncate(t)
	return fmt.Sprintf("%d.%06d", t.Unix(), t.Nanosecond()/1000)
}

// Truncate returns t in UTC, truncated to the microsecond: the precision the
// journal stores and hashes.
func Truncate(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// PayloadHash is the approval binding: lowercase hex SHA-256 of the exact
// input bytes. No canonicalisation: reformatted JSON is another payload.
func PayloadHash(input string) string {
	sum := sha256.Sum256([]byte(input))
	return hex.EncodeToString(sum[:])
}

// Verification is the result of walking a journal's hash chain.
type Verification struct {
	Valid        bool   `json:"valid"`
	EntryCount   int    `json:"entryCount"`
	BreakAtIndex int    `json:"breakAtIndex"`
	Message      string `json:"message"`
}

// Verify walks entries (one saga's journal, ordered by seq) from the zero
// hash, recomputing each entry from its stored fields and the previous
// stored hash. The first entry whose hash differs, or whose seq is not one
// more than the one before it, breaks the chain. Verify is pure.
func Verify(entries []Entry) Verification {
	n := len(entries)
	if n == 0 {
		return Verification{Valid: true, BreakAtIndex: -1, Message: "empty journal"}
	}
	prev := ZeroHash
	for i, e := range entries {
		if e.Unreadable != "" {
			return broken(n, i, fmt.Sprintf("unreadable entry at seq=%d (entry %d): %s", e.Seq, i, e.Unreadable))
		}
		if Hash(prev, e) != e.Hash {
			return broken(n, i, fmt.Sprintf("hash mismatch at seq=%d (entry %d)", e.Seq, i))
		}
		if e.Seq != int64(i)+1 || e.SagaID != entries[0].SagaID {
			return broken(n, i, fmt.Sprintf("sequence break at seq=%d (entry %d): expected seq=%d of saga %q", e.Seq, i, i+1, entries[0].SagaID))
		}
		prev = e.Hash
	}
	return Verification{Valid: true, EntryCount: n, BreakAtIndex: -1, Message: fmt.Sprintf("all %d entries verified", n)}
}

// VerifySaga verifies a saga's journal like Verify, then against what the
// saga's row and its pending requests record: the journal must end at the
// head the row records, which catches rows deleted from the tail, and each
// pending request must stand for an AWAITING_APPROVAL entry of the same
// tool and input with that input's hash, which catches a request row
// rewritten behind the journal's back. VerifySaga is pure.
func VerifySaga(entries []Entry, s Saga, reqs []ApprovalRequest) Verification {
	n := len(entries)
	if s.Unreadable != "" {
		return broken(n, n, fmt.Sprintf("saga record unreadable: %s", s.Unreadable))
	}
	v := Verify(entries)
	if !v.Valid {
		return v
	}
	var lastSeq int64
	lastHash := ZeroHash
	if n > 0 {
		lastSeq, lastHash = entries[n-1].Seq, entries[n-1].Hash
	}
	switch {
	case lastSeq < s.HeadSeq:
		return broken(n, n, fmt.Sprintf("journal truncated: it ends at seq=%d but the saga's head is seq=%d", lastSeq, s.HeadSeq))
	case lastSeq > s.HeadSeq || lastHash != s.HeadHash:
		return broken(n, n-1, fmt.Sprintf("head mismatch at seq=%d (entry %d): the saga records head seq=%d hash=%s", lastSeq, n-1, s.HeadSeq, s.HeadHash))
	}
	for _, r := range reqs {
		i := r.JournalSeq - 1
		if i < 0 || i >= int64(n) {
			return broken(n, n, fmt.Sprintf("approval request at seq=%d has no journal entry", r.JournalSeq))
		}
		if g := entries[i]; r.SagaID != s.ID || g.Phase != PhaseAwaitingApproval || g.ToolName != r.ToolName ||
			g.Input != r.Input || r.InputHash != PayloadHash(g.Input) {
			return broken(n, int(i), fmt.Sprintf("approval request at seq=%d does not match the journal (entry %d)", r.JournalSeq, i))
		}
	}
	return v
}

func broken(n, i int, msg string) Verification {
	return Verification{Valid: false, EntryCount: n, BreakAtIndex: i, Message: msg}
}
