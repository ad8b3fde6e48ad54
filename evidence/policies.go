package evidence

import (
	"encoding/base64"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// Every approval policy document that takes effect is journaled, its full
// text and its hash, as an entry of one saga of the server's own,
// PolicySaga: like every entry it becomes a leaf of the global log, so an
// auditor holding a checkpoint reads the exact rules behind any hash a
// request records. The entry carries the document's hash signed with the
// server's key: a document written into the database by hand is never
// taken for one the server ran.

// PolicySaga is the saga whose journal holds every approval policy
// document that took effect, oldest first. No agent may call in it.
const PolicySaga = "sagacity:policies"

// PolicyTool names the entries of PolicySaga.
const PolicyTool = "approval-policy"

// policyForm is the grammar of the server's signed statement of a policy
// document's hash.
var policyForm = Form{Header: "sagacity approval policy v1", Keys: []string{"policy-sha256"}, Required: []string{"policy-sha256"}}

// PolicyNote is the text the server signs for the policy document of
// hash.
func PolicyNote(hash string) string { return policyForm.Encode(Field{"policy-sha256", hash}) }

// PolicyDocument is a policy document as PolicySaga journals it.
type PolicyDocument struct {
	Hash  string    // its SHA-256, hex
	Text  string    // the canonical document
	Since time.Time // when it took effect (its entry's time)
	Seq   int64     // its entry in PolicySaga
}

// OpenPolicy checks a PolicySaga entry: the document it holds has the
// hash it names, and the key signed that hash. An *Error otherwise.
func OpenPolicy(en Entry, v note.Verifier) (PolicyDocument, error) {
	bad := func(why string) (PolicyDocument, error) {
		return PolicyDocument{}, errorf("seq=%d of %s is no policy document the key signed: %s", en.Seq, PolicySaga, why)
	}
	hash := en.Field(KeyPolicy)
	switch {
	case en.ToolName != PolicyTool || en.Phase != PhaseExecuted:
		return bad("it is a " + string(en.Phase) + " entry of " + en.ToolName)
	case hash != PayloadHash(en.Input):
		return bad("the document's SHA-256 is not the hash it names")
	}
	signed, err := base64.StdEncoding.DecodeString(en.Field(KeyReceipt))
	if err != nil {
		return bad("its signature is not base64")
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return bad("its signature does not verify with " + v.Name())
	}
	if n.Text != PolicyNote(hash) {
		return bad("the key signed another document")
	}
	return PolicyDocument{Hash: hash, Text: en.Input, Since: en.Timestamp, Seq: en.Seq}, nil
}
