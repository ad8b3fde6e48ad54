package wire

import "time"

// Entry is one line of a journal export: an entry and, in an export with
// proofs, its index in the global log, the checkpoint's size and its
// inclusion proof (RFC 6962 hashes). Timestamp is written as the hash
// chain covers it: UTC, with six fractional digits.
type Entry struct {
	SagaID    string    `json:"sagaId"`
	Seq       int64     `json:"seq"`
	ToolName  string    `json:"toolName"`
	Phase     string    `json:"phase"`
	Input     string    `json:"input"`
	Payload   string    `json:"payload"`
	Timestamp string    `json:"timestamp"`
	Hash      string    `json:"hash"`
	Leaf      *int64    `json:"leaf,omitempty"`
	TreeSize  *int64    `json:"treeSize,omitempty"`
	Proof     *[][]byte `json:"proof,omitempty"`
}

// ExportHead is the last line of an export with proofs: the server's
// signed note naming the saga's last entry.
type ExportHead struct {
	Head string `json:"head"`
}

// Export is a journal export with its proofs as its lines read (GET
// /sagacity/audit/{sagaId}?proofs=N): its entries, oldest first, each
// with its proof when the checkpoint covers it; its ExportPolicy,
// ExportPasskey, ExportSignIn and ExportDelegation lines' entries; and
// its ExportHead.
type Export struct {
	Entries     []Entry
	Policies    []Entry
	Passkeys    []Entry
	SignIns     []Entry
	Delegations []Entry
	Head        string
}

// ExportPolicy is a line of an export with proofs, after the entries and
// before the head, one for each approval policy the saga's requests pin:
// the entry of the server's own saga "sagacity:policies" that holds the
// policy's whole document, with its proof against the same checkpoint.
type ExportPolicy struct {
	Policy Entry `json:"policy"`
}

// ExportPasskey is a line of an export with proofs, after the entries and
// before the head, one for each enrolment and removal of a passkey the
// saga's votes were signed with: the entry of the server's own saga
// "sagacity:passkeys" that binds the credential's public key to a person
// (issuer and subject), or removes it, with its proof against the same
// checkpoint.
type ExportPasskey struct {
	Passkey Entry `json:"passkey"`
}

// ExportSignIn is a line of an export with proofs, after the entries and
// before the head, for each sign-in its decisions and its passkeys'
// enrolments name, and each provider key those sign-ins name: the entry
// of the server's own saga "sagacity:sign-ins" that holds the identity
// provider's signed ID token of the sign-in, or its public key, with its
// proof against the same checkpoint, so that `sagacity verify` checks that
// the provider signed each decider's sign-in.
type ExportSignIn struct {
	SignIn Entry `json:"signIn"`
}

// ExportDelegation is a line of an export with proofs, after the entries
// and before the head, one for each delegation the saga's delegated votes
// stand on and each revocation of it: the entry of the server's own saga
// "sagacity:delegations" that records it, with its proof against the
// same checkpoint.
type ExportDelegation struct {
	Delegation Entry `json:"delegation"`
}

// Verification is what verifying a saga's journal found.
type Verification struct {
	Valid      bool `json:"valid"`
	EntryCount int  `json:"entryCount"`
	// BreakAtIndex is the index of the first entry that does not verify,
	// -1 when all do.
	BreakAtIndex int    `json:"breakAtIndex"`
	Message      string `json:"message"`
}

// Keys are the public keys receipts and checkpoints verify with.
type Keys struct {
	Keys []string `json:"keys"`
}

// LogStatus is the state of the global log.
type LogStatus struct {
	Size int64 `json:"size"`
	// Checkpoint is the newest, a signed note; nil before the first.
	Checkpoint *string    `json:"checkpoint"`
	SignedAt   *time.Time `json:"signedAt"`
	// Halted names why executions of IRREVERSIBLE tools are halted; absent
	// when they are not.
	Halted string `json:"halted,omitempty"`
	// CheckedAt and FullCheckAt are when the database was last checked
	// against the checkpoint, its newest entries and whole.
	CheckedAt   *time.Time `json:"checkedAt"`
	FullCheckAt *time.Time `json:"fullCheckAt"`
}

// ConsistencyProof proves that the log at size From is a prefix of the
// log at size To.
type ConsistencyProof struct {
	From  int64    `json:"from"`
	To    int64    `json:"to"`
	Proof [][]byte `json:"proof"`
}
