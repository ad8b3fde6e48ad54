package evidence

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/sagacity-go/sagacity/internal/parallel"
	"github.com/sagacity-go/sagacity/wire"
)

// ZeroHash is the previous hash of every saga's first entry.
const ZeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Hash returns the entry hash of e chained on prev: SHA-256 over the
// preimage AppendPreimage writes, as 64 lowercase hex digits. e.Hash is
// ignored.
func Hash(prev string, e Entry) string {
	var buf [512]byte // most entries fit: no allocation but the result
	sum := sha256.Sum256(AppendPreimage(buf[:0], prev, e))
	var h [2 * sha256.Size]byte // hex.EncodeToString would allocate twice
	hex.Encode(h[:], sum[:])
	return string(h[:])
}

// AppendPreimage appends to dst the bytes Hash feeds SHA-256 and returns
// the extended slice: eight fields, each written as its UTF-8 byte length
// in decimal, a colon and the bytes, with nothing between fields. Field
// order: prev, sagaId, seq, toolName, phase, input, payload, timestamp
// (see CanonicalTime). The length prefixes make field boundaries
// unambiguous.
func AppendPreimage(dst []byte, prev string, e Entry) []byte {
	var ts [32]byte // room for the canonical time
	return appendPreimage(dst, prev, &e, appendCanonicalTime(ts[:0], e.Timestamp))
}

// appendPreimage is AppendPreimage with e's timestamp written already.
func appendPreimage(dst []byte, prev string, e *Entry, ts []byte) []byte {
	var num [20]byte // room for the longest seq
	dst = appendField(dst, prev)
	dst = appendField(dst, e.SagaID)
	dst = appendField(dst, strconv.AppendInt(num[:0], e.Seq, 10))
	dst = appendField(dst, e.ToolName)
	dst = appendField(dst, e.Phase)
	dst = appendField(dst, e.Input)
	dst = appendField(dst, e.Payload)
	return appendField(dst, ts)
}

func appendField[F ~string | ~[]byte](dst []byte, f F) []byte {
	return append(appendLen(dst, len(f)), f...)
}

// appendLen writes a field's length prefix. Lengths under 1000 are
// written inline, without a strconv call each: with SHA instructions in
// the CPU, those calls were a noticeable part of what verifying an entry
// costs beyond hashing it.
func appendLen(dst []byte, n int) []byte {
	switch {
	case n < 10:
		return append(dst, byte('0'+n), ':')
	case n < 100:
		return append(dst, byte('0'+n/10), byte('0'+n%10), ':')
	case n < 1000:
		return append(dst, byte('0'+n/100), byte('0'+n/10%10), byte('0'+n%10), ':')
	}
	return append(strconv.AppendInt(dst, int64(n), 10), ':')
}

// hexEqual reports whether s is sum as Hash writes it, in lowercase hex,
// without writing it: a digit pair at a time, in about a third of the
// time of hex.Encode and a comparison.
func hexEqual(s string, sum *[sha256.Size]byte) bool {
	if len(s) != 2*len(sum) {
		return false
	}
	for i, b := range sum {
		if uint16(s[2*i])|uint16(s[2*i+1])<<8 != hexPairs[b] {
			return false
		}
	}
	return true
}

// hexPairs holds each byte's two lowercase hex digits, the first in the
// low byte.
var hexPairs = func() (t [256]uint16) {
	const digits = "0123456789abcdef"
	for b := range t {
		t[b] = uint16(digits[b>>4]) | uint16(digits[b&15])<<8
	}
	return t
}()

// CanonicalTime writes t as the hash chain does: UTC, truncated to
// microseconds, as "<unix seconds>.<6-digit microseconds>".
func CanonicalTime(t time.Time) string { return string(appendCanonicalTime(nil, t)) }

// appendCanonicalTime is CanonicalTime without the conversions: Unix and
// Nanosecond do not depend on t's location.
func appendCanonicalTime(dst []byte, t time.Time) []byte {
	return appendMicros(strconv.AppendInt(dst, t.Unix(), 10), t)
}

// appendMicros writes the part of t's canonical time after its seconds: a
// dot and six digits of microseconds, zero-padded. Truncating to the
// microsecond drops only what Nanosecond/1000 drops.
func appendMicros(dst []byte, t time.Time) []byte {
	us := t.Nanosecond() / 1000
	return append(dst, '.', byte('0'+us/1e5), byte('0'+us/1e4%10), byte('0'+us/1e3%10),
		byte('0'+us/100%10), byte('0'+us/10%10), byte('0'+us%10))
}

// clock writes canonical times, keeping the digits of the last second it
// wrote: a journal's entries come in bursts, many in the same second, and
// writing those digits was a noticeable part of checking an entry.
type clock struct {
	sec    int64
	digits []byte // sec in decimal; nil before the first time
}

func (c *clock) append(dst []byte, t time.Time) []byte {
	if s := t.Unix(); s != c.sec || c.digits == nil {
		c.sec, c.digits = s, strconv.AppendInt(c.digits[:0], s, 10)
	}
	return appendMicros(append(dst, c.digits...), t)
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

// Verification is the result of walking a journal's hash chain, as the
// API answers it.
type Verification = wire.Verification

// Verify walks entries (one saga's journal, ordered by seq) from the zero
// hash, recomputing each entry from its stored fields and the previous
// stored hash. The first entry whose hash differs, or whose seq is not one
// more than the one before it, breaks the chain. Verify is pure.
//
// A long journal is checked on every core: each entry's check needs only
// it and the stored hash before it, so the cores take the journal a
// chunk at a time (parallel.First); the break reported is the earliest,
// which is the break a walk from the start meets first.
func Verify(entries []Entry) Verification {
	if runtime.GOMAXPROCS(0) < 2 || len(entries) < 2*chunkSize {
		var v ChainVerifier
		for i := range entries {
			v.Add(&entries[i])
		}
		return v.Result()
	}
	saga := entries[0].SagaID
	problem := func(v *ChainVerifier, i int) string {
		prev := ZeroHash
		if i > 0 {
			prev = entries[i-1].Hash
		}
		return v.problem(&entries[i], i, prev, saga)
	}
	first := parallel.First(len(entries), chunkSize, func() *ChainVerifier { return new(ChainVerifier) },
		func(v *ChainVerifier, i int) bool { return problem(v, i) == "" })
	if first < len(entries) {
		return Broken(len(entries), first, problem(new(ChainVerifier), first))
	}
	return (&ChainVerifier{n: len(entries)}).Result()
}

// chunkSize is how many entries the cores take at a time: enough that
// handing a chunk out costs nothing beside hashing it, few enough that a
// core held up elsewhere leaves the others little to wait for.
const chunkSize = 2048

// ChainVerifier is Verify an entry at a time, for a journal streamed
// rather than held whole: Add each entry in seq order, then Result. It
// keeps one preimage buffer, so it allocates nothing per entry. The zero
// value is ready to use.
type ChainVerifier struct {
	n    int    // entries added
	saga string // the first entry's saga: every entry must be of it
	prev string // the stored hash the next entry chains on
	buf  []byte // preimage buffer, reused
	ts   []byte // timestamp buffer, reused
	clk  clock
	at   int    // index of the first break, when msg is set
	msg  string // why the chain broke; "" while it holds
}

// Add checks e as the next entry and reports whether the chain holds so
// far. After a break Add only counts entries: Result's EntryCount, like
// Verify's, counts every entry added.
func (v *ChainVerifier) Add(e *Entry) bool {
	i := v.n
	v.n++
	if v.msg != "" {
		return false
	}
	if i == 0 {
		v.saga, v.prev = e.SagaID, ZeroHash
	}
	if v.msg = v.problem(e, i, v.prev, v.saga); v.msg != "" {
		v.at = i
		return false
	}
	v.prev = e.Hash
	return true
}

// problem says why e, entry i of saga's journal, chaining on the stored
// hash prev, breaks the chain, or is "". It uses v's buffers only.
func (v *ChainVerifier) problem(e *Entry, i int, prev, saga string) string {
	if e.Unreadable != "" {
		return fmt.Sprintf("unreadable entry at seq=%d (entry %d): %s", e.Seq, i, e.Unreadable)
	}
	v.ts = v.clk.append(v.ts[:0], e.Timestamp)
	v.buf = appendPreimage(v.buf[:0], prev, e, v.ts)
	sum := sha256.Sum256(v.buf)
	switch {
	case !hexEqual(e.Hash, &sum):
		return fmt.Sprintf("hash mismatch at seq=%d (entry %d)", e.Seq, i)
	case e.Seq != int64(i)+1 || e.SagaID != saga:
		return fmt.Sprintf("sequence break at seq=%d (entry %d): expected seq=%d of saga %q", e.Seq, i, i+1, saga)
	}
	return ""
}

// Result is the verification of the entries added so far, as Verify
// reports it for them.
func (v *ChainVerifier) Result() Verification {
	switch {
	case v.msg != "":
		return Broken(v.n, v.at, v.msg)
	case v.n == 0:
		return Verification{Valid: true, BreakAtIndex: -1, Message: "empty journal"}
	}
	return Verification{Valid: true, EntryCount: v.n, BreakAtIndex: -1, Message: fmt.Sprintf("all %d entries verified", v.n)}
}

// VerifyJournal verifies a journal on its own, as an auditor holding only
// its export can: its hash chain (Verify), then the rules of its
// requests' lifecycle (ReadLifecycle). VerifyJournal is pure.
func VerifyJournal(entries []Entry) Verification {
	if v := Verify(entries); !v.Valid {
		return v
	}
	_, v := ReadLifecycle(entries)
	return v
}

// voters names who cast votes.
func voters(vs []Vote) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Name())
	}
	return out
}

// Broken is the verification of n entries that breaks at entry i (-1:
// at none), for msg.
func Broken(n, i int, msg string) Verification {
	return Verification{Valid: false, EntryCount: n, BreakAtIndex: i, Message: msg}
}
