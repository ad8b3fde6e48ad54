package evidence

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// refusedStale is the detail the gate journals when it refuses a stale
// approval's resume (the engine's RefusedStale).
const refusedStale = "stale-approval: payload changed since approval was granted"

// TestLinesVectors: the payload grammar, both ways, pinned by the vectors
// in testdata/lines.json.
func TestLinesVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/lines.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []struct {
		Name    string
		Payload string
		Lines   [][2]string
	}
	if err := json.Unmarshal(b, &vectors); err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors {
		var want Lines
		for _, l := range v.Lines {
			want = append(want, Line{Key(l[0]), l[1]})
		}
		if got := ParseLines(v.Payload); !cmp.Equal(got, want) {
			t.Errorf("%s: ParseLines(%q) = %q, want %q", v.Name, v.Payload, got, want)
		}
		if got := want.String(); got != v.Payload {
			t.Errorf("%s: %q.String() = %q, want %q", v.Name, want, got, v.Payload)
		}
	}
}

// TestLinesNoInjection: no value makes a line of its own, except the one
// that runs to the end, last.
func TestLinesNoInjection(t *testing.T) {
	ls := Lines{{KeyApprover, "mallory\nauth=oidc"}, {KeyReason, "ok\r\nreceipt=forged"}, {KeyAuth, "dev"}}
	got := ParseLines(ls.String())
	if got.Value(KeyAuth) != "dev" || got.Value(KeyApprover) != "mallory auth=oidc" || got.Value(KeyReason) != "ok  receipt=forged" ||
		got.Value(KeyReceipt) != "" {
		t.Errorf("lines with line breaks in their values read back as %q", got)
	}
	last := Lines{{KeyReason, "x"}, {KeyResult, "1\nreason=forged"}}
	if got := ParseLines(last.String()); got.Value(KeyReason) != "x" || got.Value(KeyResult) != "1\nreason=forged" {
		t.Errorf("a result that holds lines reads back as %q", got)
	}
}

// TestLinesWithout: a decision's lines without its receipt are the
// decision's other lines, in order, the result last as it was.
func TestLinesWithout(t *testing.T) {
	ls := Lines{{KeyResolvedBy, "ops"}, {KeyReason, "by phone"}, {KeyAuth, "oidc"}, {KeyReceipt, "c2lnbmVk"}, {KeyResult, "1\n2"}}
	want := "resolved-by=ops\nreason=by phone\nauth=oidc\nresult=1\n2"
	if got := ls.Without(KeyReceipt).String(); got != want {
		t.Errorf("Without(receipt) = %q, want %q", got, want)
	}
	if got := ls.Value(KeyReceipt); got != "c2lnbmVk" {
		t.Errorf("Without changed the lines it was called on: receipt = %q", got)
	}
	text := Lines{{Value: "no human approval recorded"}}
	if got := text.Without(""); !cmp.Equal(got, text) {
		t.Errorf("Without(no key) = %q, want a line of text kept", got)
	}
}

// TestEntryReaders: what the engine reads from its entries, for the
// shells: a refusal and the bytes it was presented, the seq an entry
// refers to, who an entry names.
func TestEntryReaders(t *testing.T) {
	stale := Entry{ToolName: "sendWireTransfer", Phase: PhaseRejected, Input: "seq=3",
		Payload: Lines{{Value: refusedStale}, {KeyAttempted, EncodeText("bad\x00bytes")}}.String()}
	if d, a, ok := stale.Refusal(); !ok || d != refusedStale || a != "bad\x00bytes" || stale.Refers() != 3 {
		t.Errorf("stale refusal = %q, %q, %v, refers %d", d, a, ok, stale.Refers())
	}
	drop := Entry{ToolName: "sendWireTransfer", Phase: PhaseRejected, Input: "seq=3", Payload: "dropped=aborted"}
	if _, _, ok := drop.Refusal(); ok {
		t.Errorf("a drop read as a refusal")
	}
	for _, tt := range []struct {
		e    Entry
		want string
	}{
		{Entry{ToolName: "pay", Phase: PhaseIntent, Payload: "requester=agent-1\nauth=token"}, "agent-1"},
		{Entry{ToolName: "pay", Phase: PhaseExecuted, Payload: "requester=forged"}, ""},
		{Entry{ToolName: GateTool, Phase: PhaseRejected, Payload: "dismissed-by=controller\nauth=oidc"}, "controller"},
		{Entry{ToolName: GateTool, Phase: PhaseExecuted, Payload: "resolved-by=ops\nauth=oidc"}, "ops"},
	} {
		if got := tt.e.Actor(); got != tt.want {
			t.Errorf("Actor(%+v) = %q, want %q", tt.e, got, tt.want)
		}
	}
}
