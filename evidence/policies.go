package evidence

import (
	"encoding/base64"
	"fmt"
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
	// Request is the request of it in PolicySaga whose approval put it in
	// force (EnactedBy); 0 for one that took effect when a server started
	// with it, the first document always.
	Request int64
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

// policyChain checks PolicySaga's journal (ordered by seq, its
// lifecycle lc): every document that took effect after one with
// policyChange rules is the execution of a request of exactly its bytes,
// pinned to that one, and resumed (whose votes VerifyVotes checks
// against that one's policyChange rules, as any request's). It returns
// the first document that is not, and why; 0 when all are.
func policyChain(entries []Entry, lc Lifecycle) (int64, string) {
	var prev *Entry // the document in force before
	for i := range entries {
		en := &entries[i]
		if en.ToolName != PolicyTool || en.Phase != PhaseExecuted {
			continue
		}
		if prev != nil {
			if a, err := ParsePolicy(prev.Input); err == nil && a.GatesChange() && !enacted(entries[:i], lc, *en, a.Hash) {
				return en.Seq, fmt.Sprintf("is approval policy %s, which took effect after policy %s without the approval of a "+
					"request of it under that one's policyChange rules", en.Field(KeyPolicy), a.Hash)
			}
		}
		prev = en
	}
	return 0, ""
}

// EnactedBy is the request of PolicySaga (its entries before doc's, with
// lifecycle lc) whose approved execution document entry doc is; 0 when
// it is none: a document that took effect when a server started with it.
func EnactedBy(before []Entry, lc Lifecycle, doc Entry) int64 {
	for i := len(before) - 1; i >= 0; i-- {
		in := before[i]
		if in.ToolName != PolicyTool || in.Phase != PhaseIntent || in.Input != doc.Input {
			continue
		}
		if l := lc.Requests[refSeq(in.Field(KeyResumes))]; l != nil && l.Closing == ClosedResumed && before[l.Seq-1].Input == doc.Input {
			return l.Seq
		}
		return 0
	}
	return 0
}

// enacted reports whether document doc is the execution of a request of
// its bytes pinned to policy hash and resumed (EnactedBy).
func enacted(before []Entry, lc Lifecycle, doc Entry, hash string) bool {
	seq := EnactedBy(before, lc, doc)
	return seq != 0 && before[seq-1].Field(KeyPolicy) == hash
}
