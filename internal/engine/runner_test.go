package engine

import (
	"encoding/base64"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/evidence"
)

// TestRetired: a runner is retired only by an entry of RunnerSaga whose
// retirement the key signed, for that runner and that successor, in the
// note's one form.
func TestRetired(t *testing.T) {
	keys := func() *Keys {
		skey, _, err := GenerateKeys("sagacity.example.com")
		if err != nil {
			t.Fatal(err)
		}
		k, err := NewKeys(skey)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	if got, want := evidence.RetiredNote("A", "B"), "sagacity runner retired v1\nrunner: A\nretired-by: B\n"; got != want {
		t.Errorf("evidence.RetiredNote(A, B) = %q, want %q", got, want)
	}
	ours, theirs := keys(), keys()
	entry := func(k *Keys, signed, id, by string) Entry {
		sig, err := k.Sign(evidence.RetiredNote(signed, by))
		if err != nil {
			t.Fatal(err)
		}
		return Entry{SagaID: RunnerSaga, ToolName: RunnerRetired, Phase: PhaseExecuted, Input: id,
			Payload: Lines{{KeyRetiredBy, by}, {KeyReceipt, base64.StdEncoding.EncodeToString([]byte(sig))}}.String()}
	}
	unsigned := entry(ours, "B", "B", "C")
	unsigned.Payload = Lines{{KeyRetiredBy, "C"}}.String()
	otherBy := entry(ours, "E", "E", "F")
	otherBy.Payload = Lines{{KeyRetiredBy, "G"}, {KeyReceipt, evidence.ParseLines(otherBy.Payload).Value(KeyReceipt)}}.String()
	intent := entry(ours, "H", "H", "I")
	intent.Phase = PhaseIntent
	got := Retired([]Entry{
		entry(ours, "A", "A", "B"),   // signed: retired
		unsigned,                     // no signature
		entry(theirs, "C", "C", "D"), // another key's
		entry(ours, "D", "X", "E"),   // signed for another runner
		otherBy,                      // the signature names another successor
		intent,                       // not a retirement's entry
	}, ours.Verifier())
	if diff := cmp.Diff(map[string]bool{"A": true}, got); diff != "" {
		t.Errorf("Retired (-want +got):\n%s", diff)
	}
}
