package engine

import (
	"errors"
	"testing"
)

// TestEvidenceErrors: evidence the engine's names refuse is the engine's
// Invalid error, with the evidence's own message, as the shells (the
// console's policy page among them) read it.
func TestEvidenceErrors(t *testing.T) {
	v := testKeys(t).Verifier()
	forged := []Entry{{SagaID: PasskeySaga, Seq: 1, ToolName: PasskeyEnrolled, Phase: PhaseExecuted, Input: "{}",
		Payload: Lines{{Key: KeyReceipt, Value: "not base64!"}}.String()}}
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"ParsePolicy", second(ParsePolicy(`{"tools":`)), "not an approval policy document: unexpected EOF"},
		{"DecodeText", second(DecodeText(EncodedPrefix + "!")), "journaled text has a bad sagacity-base64: encoding"},
		{"ParseReceipt", second(ParseReceipt("receipt\n")), "not a receipt: no sagacity decision receipt v1 header"},
		{"OpenReceipt", second(OpenReceipt("not a note", v)), "the receipt's signature does not verify with t"},
		{"ReadPasskeys", second(ReadPasskeys(forged, v)), "seq=1 of sagacity:passkeys is no passkey entry the key signed: its signature is not base64"},
		{"validName", validName("saga id", ""), "saga id is empty"},
	} {
		e, ok := errors.AsType[*Error](tt.err)
		if !ok || e.Kind != Invalid || e.Msg != tt.want {
			t.Errorf("%s: error %#v; want Invalid, %q", tt.name, tt.err, tt.want)
		}
	}
}

// second is the error of a function's two results.
func second[T any](_ T, err error) error { return err }

// testKeys are a new key pair named t.
func testKeys(t *testing.T) *Keys {
	t.Helper()
	skey, _, err := GenerateKeys("t")
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKeys(skey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
