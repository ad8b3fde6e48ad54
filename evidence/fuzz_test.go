package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzHash checks the chain's encoder against the encoding written out
// from SPEC §3 by hand: each field as its byte length in decimal, a colon
// and the bytes, in order, then SHA-256 as lowercase hex. And two entries
// that differ in any field never share a preimage.
func FuzzHash(f *testing.F) {
	f.Add(ZeroHash, "s1", int64(1), "reserveInventory", "INTENT", "{}", "", int64(1784628000000000))
	f.Add("", "a|b", int64(-1), "c", "", "\x00", "\xff", int64(0))
	f.Add("1:a", "2:bc", int64(12), "", "3:", "", "9:", int64(-62135596800000000))
	f.Fuzz(func(t *testing.T, prev, saga string, seq int64, tool, phase, input, payload string, micros int64) {
		e := Entry{SagaID: saga, Seq: seq, ToolName: tool, Phase: Phase(phase), Input: input, Payload: payload,
			Timestamp: time.UnixMicro(micros)}
		ts := e.Timestamp.UTC().Truncate(time.Microsecond)
		var pre []byte
		for _, s := range []string{prev, saga, strconv.FormatInt(seq, 10), tool, phase, input, payload,
			fmt.Sprintf("%d.%06d", ts.Unix(), ts.Nanosecond()/1000)} {
			pre = append(pre, strconv.Itoa(len(s))+":"+s...)
		}
		if got := AppendPreimage([]byte("x"), prev, e); !bytes.Equal(got[1:], pre) || got[0] != 'x' {
			t.Errorf("AppendPreimage(x, %q, %+v) = %q, want x%q", prev, e, got, pre)
		}
		sum := sha256.Sum256(pre)
		if got, want := Hash(prev, e), hex.EncodeToString(sum[:]); got != want {
			t.Errorf("Hash(%q, %+v) = %s, want %s", prev, e, got, want)
		}
		// Moving a byte from one field to its neighbour changes the hash.
		if len(input) > 0 {
			moved := e
			moved.ToolName, moved.Input = tool+input[:1], input[1:]
			if Hash(prev, moved) == Hash(prev, e) {
				t.Errorf("Hash(%+v) = Hash(%+v): field boundaries are ambiguous", moved, e)
			}
		}
	})
}

// FuzzReadNDJSON feeds the export reader of `sagacity verify` anything: it
// never panics, refuses with Invalid, and what it reads it writes back so
// that it reads the same again.
func FuzzReadNDJSON(f *testing.F) {
	export, err := os.ReadFile("testdata/export.ndjson")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(export)
	f.Add([]byte(""))
	f.Add([]byte("\n\n{}\n"))
	f.Add([]byte(`{"sagaId":"s","seq":1,"toolName":"t","phase":"INTENT","input":"\u0000","payload":"\ud800","timestamp":"2026-07-21T10:00:00Z","hash":""}`))
	f.Add([]byte(`{"sagaId":"s","seq":1,"toolName":"t","phase":"INTENT","input":"","payload":"","timestamp":"2026-07-21T10:00:00Z","hash":"","leaf":0,"treeSize":2,"proof":["AAAA"]}`))
	f.Add([]byte(`{"sagaId":"s","seq":1e400,"toolName":"t","phase":"INTENT","input":"","payload":"","timestamp":"0000-01-01T00:00:00Z","hash":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, proofs, err := ReadNDJSON(bytes.NewReader(data))
		if err != nil {
			if !isEvidence(err) {
				t.Errorf("ReadNDJSON(%q) error %v, want kind invalid", data, err)
			}
			return
		}
		_ = VerifyJournal(entries) // must not panic on anything it read
		var out bytes.Buffer
		if err := WriteNDJSON(&out, entries, proofs); err != nil {
			t.Fatalf("WriteNDJSON(%+v): %v", entries, err)
		}
		first := bytes.Clone(out.Bytes())
		again, againProofs, err := ReadNDJSON(&out)
		if err != nil {
			t.Fatalf("ReadNDJSON(WriteNDJSON(%+v)) = %v", entries, err)
		}
		// Strings that are not UTF-8 are written as U+FFFD; compare what
		// round-trips in a second pass.
		var twice bytes.Buffer
		if err := WriteNDJSON(&twice, again, againProofs); err != nil || !bytes.Equal(first, twice.Bytes()) {
			t.Errorf("export of %q does not round-trip:\n%s\n%s", data, first, twice.Bytes())
		}
		if len(again) != len(entries) {
			t.Errorf("ReadNDJSON read %d entries back, want %d", len(again), len(entries))
		}
	})
}

// FuzzEncodeText: the journal's encoding of bytes no store keeps is
// reversible and always storable.
func FuzzEncodeText(f *testing.F) {
	for _, s := range []string{"", "ok", "\x00", "\xff", EncodedPrefix, EncodedPrefix + "!!"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := EncodeText(s)
		// What both stores keep byte for byte (the engine's validInput).
		if !utf8.ValidString(enc) || strings.IndexByte(enc, 0) >= 0 {
			t.Errorf("EncodeText(%q) = %q, not storable: not UTF-8 without NUL", s, enc)
		}
		if back, err := DecodeText(enc); err != nil || back != s {
			t.Errorf("DecodeText(EncodeText(%q)) = %q, %v", s, back, err)
		}
		if _, err := DecodeText(s); err != nil && !isEvidence(err) {
			t.Errorf("DecodeText(%q) = %v, want nil or invalid", s, err)
		}
	})
}
