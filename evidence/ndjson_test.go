package evidence

import (
	"bytes"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/wire"
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

// attachedSample is a journal exported with proofs, its policies' and
// passkeys' entries (one policy proved, one the checkpoint does not
// cover) and a head.
func attachedSample() ([]Entry, *Proofs) {
	es := exportSample()
	ps := &Proofs{TreeSize: 9, Of: make([][][]byte, len(es)), Head: "sagacity saga head v1\nsaga: transfer-77\n"}
	for i := range es {
		es[i].Leaf = int64(i + 1)
		ps.Of[i] = [][]byte{bytes.Repeat([]byte{byte(i)}, 32)}
	}
	for i, doc := range []string{`{"default":[{"name":"default","approvers":["approver"],"quorum":1}]}`, `{"tools":{"a":[]}}`} {
		p := Entry{SagaID: PolicySaga, Seq: int64(i + 1), ToolName: PolicyTool, Phase: PhaseExecuted, Input: doc,
			Payload: "policy=" + PayloadHash(doc) + "\nreceipt=c2lnbmVk", Timestamp: t0.Add(-time.Hour), Leaf: -1}
		p.Hash = Hash(ZeroHash, p)
		var proof [][]byte
		if i == 0 { // the second is newer than the checkpoint
			p.Leaf, proof = 0, [][]byte{bytes.Repeat([]byte{9}, 32), bytes.Repeat([]byte{8}, 32)}
		}
		ps.Policies.Entries, ps.Policies.Of = append(ps.Policies.Entries, p), append(ps.Policies.Of, proof)
	}
	for i, tool := range []string{PasskeyEnrolled, PasskeyRemoved} {
		in := `{"credential":"Y3JlZA","identity":"alice"}`
		k := Entry{SagaID: PasskeySaga, Seq: int64(i + 1), ToolName: tool, Phase: PhaseExecuted, Input: in,
			Payload: "passkey=Y3JlZA\nreceipt=c2lnbmVk", Timestamp: t0.Add(-time.Hour), Leaf: int64(i + 2)}
		k.Hash = Hash(ZeroHash, k)
		ps.Passkeys.Entries, ps.Passkeys.Of = append(ps.Passkeys.Entries, k), append(ps.Passkeys.Of, [][]byte{bytes.Repeat([]byte{7}, 32)})
	}
	return es, ps
}

// TestNDJSONPolicies: an export with proofs carries the policies its
// requests pin and its passkeys' entries, each on a line of its own
// after the entries and before the head (one proved, one the checkpoint
// does not cover), and reads back as written.
func TestNDJSONPolicies(t *testing.T) {
	es, ps := attachedSample()
	var buf bytes.Buffer
	if err := WriteNDJSON(&buf, es, ps); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for l := range strings.Lines(buf.String()) {
		kind, _, _ := strings.Cut(strings.TrimPrefix(l, `{"`), `"`)
		kinds = append(kinds, kind)
	}
	if diff := cmp.Diff([]string{"sagaId", "sagaId", "sagaId", "sagaId", "policy", "policy", "passkey", "passkey", "head"}, kinds); diff != "" {
		t.Errorf("WriteNDJSON(x, proofs with policies) lines' first keys differ (-want +got):\n%s\n%s", diff, buf.String())
	}
	got, gotProofs, err := ReadNDJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(es, got); diff != "" {
		t.Errorf("ReadNDJSON(WriteNDJSON(x, proofs)) entries differ (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ps, gotProofs); diff != "" {
		t.Errorf("ReadNDJSON(WriteNDJSON(x, proofs)) proofs differ (-want +got):\n%s", diff)
	}
}

// TestReadExport: an export's lines, as the Go client holds them, read as
// the export they are, and are refused as it would be, naming the line.
func TestReadExport(t *testing.T) {
	es, ps := attachedSample()
	x := ExportOf(es, ps)
	got, gotProofs, err := ReadExport(x)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(es, got); diff != "" {
		t.Errorf("ReadExport(ExportOf(x, proofs)) entries differ (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ps, gotProofs); diff != "" {
		t.Errorf("ReadExport(ExportOf(x, proofs)) proofs differ (-want +got):\n%s", diff)
	}
	foreign := ExportOf(es, ps)
	foreign.Passkeys = slices.Clone(foreign.Passkeys)
	foreign.Passkeys[1].SagaID = "transfer-77"
	unproved := ExportOf(es, nil)
	unproved.Head = ps.Head
	for _, tt := range []struct {
		name string
		x    wire.Export
		want string
	}{
		{"a passkey line of another saga", foreign, "line 8: a passkey line must hold an entry of saga sagacity:passkeys"},
		{"a head without proofs", unproved, "the export has a head but no proofs"},
	} {
		if _, _, err := ReadExport(tt.x); err == nil || !strings.HasPrefix(Message(err), tt.want) {
			t.Errorf("%s: ReadExport = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestReadNDJSONRejects(t *testing.T) {
	line := `{"sagaId":"s","seq":1,"toolName":"t","phase":"INTENT","input":"","payload":"","timestamp":"2026-07-21T10:00:00Z","hash":"x"}`
	proved := strings.Replace(line, `"hash"`, `"leaf":1,"treeSize":2,"proof":[],"hash"`, 1) + "\n"
	policy := `{"policy":{"sagaId":"sagacity:policies","seq":1,"toolName":"approval-policy","phase":"EXECUTED","input":"{}",` +
		`"payload":"policy=x","timestamp":"2026-07-21T10:00:00Z","hash":"y","leaf":0,"treeSize":2,"proof":[]}}` + "\n"
	passkey := strings.NewReplacer(`{"policy"`, `{"passkey"`, `"sagacity:policies"`, `"sagacity:passkeys"`,
		`"approval-policy"`, `"passkey-enrolled"`).Replace(policy)
	head := `{"head":"h"}` + "\n"
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
		{"a policy line after the head", proved + head + policy, "line 3: after the export's head"},
		{"a policy line of another saga", proved + strings.Replace(policy, `"sagacity:policies"`, `"s"`, 1) + head,
			`line 2: a policy line must hold an entry of saga sagacity:policies, tool approval-policy, phase EXECUTED; not of saga "s", tool "approval-policy", phase EXECUTED`},
		{"a policy line of another tool", proved + strings.Replace(policy, `"approval-policy"`, `"t"`, 1) + head,
			`line 2: a policy line must hold an entry of saga sagacity:policies, tool approval-policy, phase EXECUTED; not of saga "sagacity:policies", tool "t", phase EXECUTED`},
		{"a policy line of another phase", proved + strings.Replace(policy, `"EXECUTED"`, `"INTENT"`, 1) + head,
			`line 2: a policy line must hold an entry of saga sagacity:policies, tool approval-policy, phase EXECUTED; not of saga "sagacity:policies", tool "approval-policy", phase INTENT`},
		{"a policy line twice", proved + policy + policy + head, "line 3: the policy line of seq=1 again"},
		{"a policy line before an entry", policy + proved + head, "line 2: an entry after the export's policy, passkey and sign-in lines"},
		{"an entry between policy lines", proved + policy + proved + strings.Replace(policy, `"seq":1`, `"seq":2`, 1) + head,
			"line 3: an entry after the export's policy, passkey and sign-in lines"},
		{"a policy line without proofs", line + "\n" + strings.Replace(policy, `,"leaf":0,"treeSize":2,"proof":[]`, "", 1),
			"line 2: a policy, passkey or sign-in line in an export without proofs"},
		{"a passkey line of the policies' saga", proved + strings.Replace(policy, `{"policy"`, `{"passkey"`, 1) + head,
			`line 2: a passkey line must hold an entry of saga sagacity:passkeys, tool passkey-enrolled or passkey-removed, phase EXECUTED; ` +
				`not of saga "sagacity:policies", tool "approval-policy", phase EXECUTED`},
		{"a passkey line twice", proved + passkey + passkey + head, "line 3: the passkey line of seq=1 again"},
		{"a passkey line without proofs", line + "\n" + strings.Replace(passkey, `,"leaf":0,"treeSize":2,"proof":[]`, "", 1),
			"line 2: a policy, passkey or sign-in line in an export without proofs"},
		{"a policy line against another size", proved + strings.Replace(policy, `"treeSize":2`, `"treeSize":3`, 1) + head,
			"line 2: proof against tree size 3, where earlier lines' are against 2"},
		{"a policy line missing a key", proved + `{"policy":{"sagaId":"sagacity:policies"}}` + "\n" + head, `line 2: missing key "seq"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ReadNDJSON(strings.NewReader(tt.in))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) || !isEvidence(err) {
				t.Errorf("ReadNDJSON(%q) error = %v, want Invalid starting %q", tt.in, err, tt.want)
			}
		})
	}
}
