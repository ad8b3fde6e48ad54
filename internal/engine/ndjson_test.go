package engine

import (
	"bytes"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// exportSample is a journal whose strings need escaping.
func exportSample() []Entry {
	var es []Entry
	prev := ZeroHash
	for i, f := range []struct {
		tool           string
		phase          Phase
		input, payload string
	}{
		{"sendWireTransfer", PhaseAwaitingApproval, `{"amount":"100","to":"alice"}`, ""},
		{GateTool, PhaseApproved, "seq=1", "approver=manager@company.com\nreason=ok <fine> & \"done\"\nauth=dev"},
		{"sendWireTransfer", PhaseIntent, `{"amount":"100","to":"alice"}`, ""},
		{"sendWireTransfer", PhaseExecuted, `{"amount":"100","to":"alice"}`, "line1\nline2\ttab\u0001ctl €"},
	} {
		e := Entry{SagaID: "transfer-77", Seq: int64(i + 1), ToolName: f.tool, Phase: f.phase, Input: f.input,
			Payload: f.payload, Timestamp: t0.Add(time.Duration(i)*time.Second + 123*time.Microsecond), Leaf: -1}
		e.Hash = Hash(prev, e)
		prev = e.Hash
		es = append(es, e)
	}
	return es
}

func TestNDJSONGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteNDJSON(&buf, exportSample(), nil); err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/export.ndjson"
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), buf.String()); diff != "" {
		t.Errorf("WriteNDJSON output differs from %s (-want +got):\n%s", golden, diff)
	}
	if n := strings.Count(buf.String(), "\n"); n != 4 {
		t.Errorf("WriteNDJSON wrote %d lines, want 4", n)
	}
}

func TestNDJSONRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteNDJSON(&buf, exportSample(), nil); err != nil {
		t.Fatal(err)
	}
	got, proofs, err := ReadNDJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(exportSample(), got); diff != "" {
		t.Errorf("ReadNDJSON(WriteNDJSON(x)) differs from x (-want +got):\n%s", diff)
	}
	if v := Verify(got); !v.Valid {
		t.Errorf("Verify(round trip) = %+v, want valid", v)
	}
	if proofs != nil {
		t.Errorf("ReadNDJSON of an export without proofs = %+v, want nil proofs", proofs)
	}
}

// TestNDJSONProofs: an export with its entries' inclusion proofs (one
// entry left unproved) reads back as written.
func TestNDJSONProofs(t *testing.T) {
	es := exportSample()
	for i := range es {
		es[i].Leaf = int64(i)
	}
	ps := &Proofs{TreeSize: 5, Of: make([][][]byte, len(es))}
	for i := range es[:3] { // the last entry is left unproved
		ps.Of[i] = [][]byte{bytes.Repeat([]byte{byte(i)}, 32), bytes.Repeat([]byte{7}, 32)}
	}
	var buf bytes.Buffer
	if err := WriteNDJSON(&buf, es, ps); err != nil {
		t.Fatal(err)
	}
	got, gotProofs, err := ReadNDJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(es)
	want[3].Leaf = -1 // an unproved entry carries no leaf
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadNDJSON(WriteNDJSON(x, proofs)) entries differ (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ps, gotProofs); diff != "" {
		t.Errorf("ReadNDJSON(WriteNDJSON(x, proofs)) proofs differ (-want +got):\n%s", diff)
	}
}

func TestReadNDJSONRejects(t *testing.T) {
	line := `{"sagaId":"s","seq":1,"toolName":"t","phase":"INTENT","input":"","payload":"","timestamp":"2026-07-21T10:00:00Z","hash":"x"}`
	tests := []struct{ name, in, want string }{
		{"not json", "hello\n", "line 1:"},
		{"missing key", `{"sagaId":"s","seq":1}`, `line 1: missing key "toolName"`},
		{"unknown key", strings.Replace(line, `"hash"`, `"extra":1,"hash"`, 1), "line 1: json: unknown field"},
		{"seq as string", strings.Replace(line, `"seq":1`, `"seq":"1"`, 1), "line 1: json: cannot unmarshal"},
		{"bad time", strings.Replace(line, "2026-07-21T10:00:00Z", "yesterday", 1), "line 1: timestamp"},
		{"unknown phase", strings.Replace(line, "INTENT", "DONE", 1), `line 1: unknown phase "DONE"`},
		{"trailing data", line + "{}", "line 1:"},
		{"second line", line + "\n[]\n", "line 2:"},
		{"leaf alone", strings.Replace(line, `"hash"`, `"leaf":0,"hash"`, 1), "line 1: leaf, treeSize and proof come together"},
		{"leaf beyond the tree", strings.Replace(line, `"hash"`, `"leaf":2,"treeSize":2,"proof":[],"hash"`, 1), "line 1: leaf 2 is not in a tree of size 2"},
		{"proofs against two sizes", strings.Replace(line, `"hash"`, `"leaf":0,"treeSize":2,"proof":[],"hash"`, 1) + "\n" +
			strings.Replace(line, `"hash"`, `"leaf":1,"treeSize":3,"proof":[],"hash"`, 1), "line 2: proof against tree size 3, where earlier lines' are against 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ReadNDJSON(strings.NewReader(tt.in))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) || !IsKind(err, Invalid) {
				t.Errorf("ReadNDJSON(%q) error = %v, want Invalid starting %q", tt.in, err, tt.want)
			}
		})
	}
}
