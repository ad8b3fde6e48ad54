package evidence

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/wire"
)

type vectorFile struct {
	PayloadHashes []struct {
		Payload string `json:"payload"`
		SHA256  string `json:"sha256"`
	} `json:"payloadHashes"`
	Vectors []struct {
		Name               string     `json:"name"`
		PrevHash           string     `json:"prevHash"`
		Entry              wire.Entry `json:"entry"` // the export's line format, without a hash
		CanonicalTimestamp string     `json:"canonicalTimestamp"`
		PreimageHex        string     `json:"preimageHex"`
		Hash               string     `json:"hash"`
	} `json:"vectors"`
}

// TestHashVectors reproduces an independent implementation's vectors
// (testdata/hash-chain.json, copied from the project's shared vectors).
func TestHashVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/hash-chain.json")
	if err != nil {
		t.Fatal(err)
	}
	var vf vectorFile
	if err := json.Unmarshal(b, &vf); err != nil {
		t.Fatal(err)
	}
	if len(vf.Vectors) < 13 || len(vf.PayloadHashes) < 2 {
		t.Fatalf("testdata has %d vectors and %d payload hashes; want at least 13 and 2", len(vf.Vectors), len(vf.PayloadHashes))
	}
	for _, v := range vf.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			ts, err := time.Parse(time.RFC3339Nano, v.Entry.Timestamp)
			if err != nil {
				t.Fatal(err)
			}
			e := Entry{SagaID: v.Entry.SagaID, Seq: v.Entry.Seq, ToolName: v.Entry.ToolName, Phase: Phase(v.Entry.Phase),
				Input: v.Entry.Input, Payload: v.Entry.Payload, Timestamp: ts}
			if got := CanonicalTime(ts); got != v.CanonicalTimestamp {
				t.Errorf("CanonicalTime(%s) = %q, want %q", v.Entry.Timestamp, got, v.CanonicalTimestamp)
			}
			if got := hex.EncodeToString(AppendPreimage(nil, v.PrevHash, e)); got != v.PreimageHex {
				t.Errorf("preimage of %+v =\n%s\nwant\n%s", e, got, v.PreimageHex)
			}
			if got := Hash(v.PrevHash, e); got != v.Hash {
				t.Errorf("Hash(%s, %+v) = %s, want %s", v.PrevHash, e, got, v.Hash)
			}
		})
	}
	for _, p := range vf.PayloadHashes {
		if got := PayloadHash(p.Payload); got != p.SHA256 {
			t.Errorf("PayloadHash(%q) = %s, want %s", p.Payload, got, p.SHA256)
		}
	}
}

var t0 = time.Date(2026, 7, 21, 10, 0, 0, 0, time.UTC)

// TestHashSpecVectors pins the vectors written in SPEC §3.
func TestHashSpecVectors(t *testing.T) {
	e1 := Entry{SagaID: "s1", Seq: 1, ToolName: "reserveInventory", Phase: PhaseIntent, Input: "{}", Timestamp: t0}
	h1 := Hash(ZeroHash, e1)
	if want := "2b8f009dcde4115339f77250ec69761e299c66809b569f77fe75033c04f80a4b"; h1 != want {
		t.Errorf("Hash(zero, seq 1 INTENT) = %s, want %s", h1, want)
	}
	e2 := Entry{SagaID: "s1", Seq: 2, ToolName: "reserveInventory", Phase: PhaseExecuted, Input: "{}", Payload: "ok", Timestamp: t0.Add(time.Second)}
	if got, want := Hash(h1, e2), "9058ec436f5710616413c86679ae40f6e6d6cb1828ada8584dfdf4c99020feea"; got != want {
		t.Errorf("Hash(h1, seq 2 EXECUTED) = %s, want %s", got, want)
	}
	if got, want := PayloadHash(`{"amount":"100","to":"alice"}`), "79c2a2413a3be71034f0a649bde0d50c5c3e32d5482db1d21549e82c59653e9b"; got != want {
		t.Errorf("PayloadHash = %s, want %s", got, want)
	}
	if got, want := CanonicalTime(t0), "1784628000.000000"; got != want {
		t.Errorf("CanonicalTime(%v) = %s, want %s", t0, got, want)
	}
}

func TestHashBoundaries(t *testing.T) {
	base := Entry{SagaID: "s1", Seq: 1, ToolName: "reserveInventory", Phase: PhaseIntent, Timestamp: t0}
	with := func(f func(*Entry)) string { e := base; f(&e); return Hash(ZeroHash, e) }
	differ := []struct {
		name string
		a, b func(*Entry)
	}{
		{"a|b+c vs a+b|c", func(e *Entry) { e.Input, e.Payload = "a|b", "c" }, func(e *Entry) { e.Input, e.Payload = "a", "b|c" }},
		{"transferFunds vs transfer+Funds", func(e *Entry) { e.ToolName, e.Input = "transferFunds", "" }, func(e *Entry) { e.ToolName, e.Input = "transfer", "Funds" }},
		{"€uro vs €+uro", func(e *Entry) { e.Input = "€uro" }, func(e *Entry) { e.Input, e.Payload = "€", "uro" }},
		{"1µs apart", func(e *Entry) {}, func(e *Entry) { e.Timestamp = t0.Add(time.Microsecond) }},
		{"phase", func(e *Entry) {}, func(e *Entry) { e.Phase = PhaseExecuted }},
		{"seq", func(e *Entry) {}, func(e *Entry) { e.Seq = 2 }},
		{"saga", func(e *Entry) {}, func(e *Entry) { e.SagaID = "s2" }},
	}
	for _, c := range differ {
		if with(c.a) == with(c.b) {
			t.Errorf("%s: hashes are equal, want different", c.name)
		}
	}
	if a, b := with(func(*Entry) {}), with(func(e *Entry) { e.Timestamp = t0.Add(999 * time.Nanosecond) }); a != b {
		t.Errorf("sub-microsecond difference changed the hash: %s vs %s", a, b)
	}
	if a, b := with(func(*Entry) {}), with(func(e *Entry) { e.Timestamp = t0.In(time.FixedZone("x", 7200)) }); a != b {
		t.Errorf("time zone changed the hash: %s vs %s", a, b)
	}
	if got, want := CanonicalTime(t0.Add(123*time.Microsecond)), "1784628000.000123"; got != want {
		t.Errorf("CanonicalTime = %s, want %s", got, want)
	}
}

// TestCanonicalTime checks the formatting without fmt against the
// definition, where it could go wrong: sub-microsecond digits, before 1970
// and before year 1 (truncation goes down, never toward 1970), zones.
func TestCanonicalTime(t *testing.T) {
	for _, ts := range []time.Time{
		t0, t0.Add(time.Microsecond), t0.Add(999_999_999), t0.Add(100_000_999), t0.Add(10 * time.Microsecond),
		time.Unix(0, 0), time.Unix(0, -1), time.Unix(-1, 1_000), time.Unix(-62135596801, 999_999_999),
		time.UnixMicro(-62135596800000075), time.Unix(1<<40, 5_000).In(time.FixedZone("x", -3600)), {},
	} {
		u := ts.UTC().Truncate(time.Microsecond)
		if got, want := CanonicalTime(ts), fmt.Sprintf("%d.%06d", u.Unix(), u.Nanosecond()/1000); got != want {
			t.Errorf("CanonicalTime(%v) = %s, want %s", ts, got, want)
		}
	}
}

// TestAppendLen checks the length prefixes written without strconv at the
// boundaries between their cases.
func TestAppendLen(t *testing.T) {
	for _, n := range []int{0, 9, 10, 99, 100, 999, 1000, 123456} {
		if got, want := string(appendLen([]byte("x"), n)), "x"+strconv.Itoa(n)+":"; got != want {
			t.Errorf("appendLen(x, %d) = %q, want %q", n, got, want)
		}
	}
}

// chain builds a valid journal of n entries.
func chain(n int) []Entry {
	var es []Entry
	prev := ZeroHash
	for i := 1; i <= n; i++ {
		e := Entry{SagaID: "s1", Seq: int64(i), ToolName: "t", Phase: PhaseIntent, Input: "{}", Timestamp: t0.Add(time.Duration(i) * time.Second)}
		e.Hash = Hash(prev, e)
		prev = e.Hash
		es = append(es, e)
	}
	return es
}

func TestVerify(t *testing.T) {
	tests := []struct {
		name   string
		mutate func([]Entry) []Entry
		want   Verification
	}{
		{"empty", func([]Entry) []Entry { return nil }, Verification{Valid: true, EntryCount: 0, BreakAtIndex: -1, Message: "empty journal"}},
		{"intact", func(es []Entry) []Entry { return es }, Verification{Valid: true, EntryCount: 4, BreakAtIndex: -1, Message: "all 4 entries verified"}},
		{"payload changed", func(es []Entry) []Entry { es[1].Payload = "x"; return es },
			Verification{Valid: false, EntryCount: 4, BreakAtIndex: 1, Message: "hash mismatch at seq=2 (entry 1)"}},
		{"hash replaced", func(es []Entry) []Entry { es[2].Hash = Hash(ZeroHash, es[2]); return es },
			Verification{Valid: false, EntryCount: 4, BreakAtIndex: 2, Message: "hash mismatch at seq=3 (entry 2)"}},
		{"hash in upper case", func(es []Entry) []Entry { es[1].Hash = strings.ToUpper(es[1].Hash); return es },
			Verification{Valid: false, EntryCount: 4, BreakAtIndex: 1, Message: "hash mismatch at seq=2 (entry 1)"}},
		{"hash cut short", func(es []Entry) []Entry { es[1].Hash = es[1].Hash[:63]; return es },
			Verification{Valid: false, EntryCount: 4, BreakAtIndex: 1, Message: "hash mismatch at seq=2 (entry 1)"}},
		{"middle deleted", func(es []Entry) []Entry { return append(es[:1], es[2:]...) },
			Verification{Valid: false, EntryCount: 3, BreakAtIndex: 1, Message: "hash mismatch at seq=3 (entry 1)"}},
		{"reordered", func(es []Entry) []Entry { es[0], es[1] = es[1], es[0]; return es },
			Verification{Valid: false, EntryCount: 4, BreakAtIndex: 0, Message: "hash mismatch at seq=2 (entry 0)"}},
		{"rehashed with a gap", func(es []Entry) []Entry {
			es = append(es[:1], es[2:]...)
			prev := es[0].Hash
			for i := 1; i < len(es); i++ {
				es[i].Hash = Hash(prev, es[i])
				prev = es[i].Hash
			}
			return es
		}, Verification{Valid: false, EntryCount: 3, BreakAtIndex: 1, Message: "sequence break at seq=3 (entry 1): expected seq=2 of saga \"s1\""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Verify(tt.mutate(chain(4))); got != tt.want {
				t.Errorf("Verify() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestChainVerifier: an entry at a time, the verifier says where the chain
// breaks and goes on counting, so its result is Verify's.
func TestChainVerifier(t *testing.T) {
	es := chain(4)
	es[2].Payload = "x"
	var v ChainVerifier
	for i := range es {
		if got, want := v.Add(&es[i]), i < 2; got != want {
			t.Errorf("Add(entry %d) = %t, want %t", i, got, want)
		}
	}
	if got, want := v.Result(), Verify(es); got != want || got.BreakAtIndex != 2 || got.EntryCount != 4 {
		t.Errorf("Result() = %+v, want %+v, broken at entry 2 of 4", got, want)
	}
	if got, want := new(ChainVerifier).Result(), Verify(nil); got != want {
		t.Errorf("zero ChainVerifier's Result() = %+v, want %+v", got, want)
	}
}

// TestAllocs: Verify allocates per journal, not per entry, and Hash only
// its result.
func TestAllocs(t *testing.T) {
	// Verify allocates for its result and its growing buffer, never per
	// entry: ten thousand entries take fewer than ten allocations more
	// than a hundred (the buffer may grow a few times more; the race
	// detector, which make test uses, adds a few of its own).
	few, many := chain(100), chain(10_000)
	a, b := testing.AllocsPerRun(5, func() { Verify(few) }), testing.AllocsPerRun(5, func() { Verify(many) })
	if b >= a+10 {
		t.Errorf("Verify made %.0f allocations for %d entries and %.0f for %d: it allocates per entry", a, len(few), b, len(many))
	}
	if n := testing.AllocsPerRun(10, func() { Hash(ZeroHash, few[0]) }); n != 1 {
		t.Errorf("Hash made %.0f allocations, want 1", n)
	}
}

// TestVerifyParts: a journal long enough to be checked a chunk at a
// time on every core breaks where a walk from the start breaks, whichever
// chunk the break is in, at a chunk's first or last entry too, and with
// breaks in two chunks the earlier is reported.
func TestVerifyParts(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	n := 6*chunkSize + 3
	walk := func(es []Entry) Verification {
		var v ChainVerifier
		for i := range es {
			v.Add(&es[i])
		}
		return v.Result()
	}
	intact := chain(n)
	if got := Verify(intact); !got.Valid || got.EntryCount != n {
		t.Fatalf("Verify(intact) = %+v", got)
	}
	mutations := map[string]func(*Entry){
		"payload":    func(e *Entry) { e.Payload = "x" },
		"saga":       func(e *Entry) { e.SagaID = "s2"; e.Hash = "" },
		"unreadable": func(e *Entry) { e.Unreadable = "seq" },
		"seq":        func(e *Entry) { e.Seq++ },
	}
	later := 5*chunkSize + 5
	for name, mutate := range mutations {
		for _, at := range []int{0, 1, chunkSize - 1, chunkSize, chunkSize + 1, 2 * chunkSize, 3*chunkSize - 1, n - 1} {
			es := slices.Clone(intact)
			mutate(&es[at])
			want := walk(es)
			if want.BreakAtIndex != at {
				t.Fatalf("%s changed at entry %d: the walk broke at %d", name, at, want.BreakAtIndex)
			}
			if got := Verify(es); got != want {
				t.Errorf("%s changed at entry %d: Verify = %+v, want %+v", name, at, got, want)
			}
			if at >= later {
				continue
			}
			es[later].Payload = "later"
			if got := Verify(es); got.BreakAtIndex != at {
				t.Errorf("%s changed at entry %d and a later chunk too: Verify broke at %d", name, at, got.BreakAtIndex)
			}
		}
	}
}

// TestVerifyClock: the verifier writes each entry's time afresh, though
// it keeps the last second's digits: entries in the same second, the
// next, an earlier one again, before 1970, and a time moved into the
// second of the entry before it, or out of it, each verify or break as
// Hash says.
func TestVerifyClock(t *testing.T) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	times := []time.Time{base, base.Add(time.Microsecond), base.Add(999_999 * time.Microsecond), base.Add(time.Second),
		base.Add(-time.Hour), base.Add(-time.Hour + 5*time.Microsecond), time.Unix(-2, 500_000_000).UTC(), time.Unix(-2, 0).UTC(),
		time.Unix(0, 0).UTC(), base.Add(time.Second)}
	es := make([]Entry, len(times))
	prev := ZeroHash
	for i, ts := range times {
		es[i] = Entry{SagaID: "s1", Seq: int64(i) + 1, ToolName: "t", Phase: PhaseIntent, Input: "{}", Timestamp: ts}
		es[i].Hash = Hash(prev, es[i])
		prev = es[i].Hash
	}
	if got := Verify(es); !got.Valid {
		t.Fatalf("Verify = %+v", got)
	}
	for i := range es {
		for _, d := range []time.Duration{time.Second, -time.Second, time.Microsecond} {
			moved := slices.Clone(es)
			moved[i].Timestamp = moved[i].Timestamp.Add(d)
			if got := Verify(moved); got.Valid || got.BreakAtIndex != i {
				t.Errorf("entry %d's time moved by %s: Verify = %+v", i, d, got)
			}
		}
	}
}
