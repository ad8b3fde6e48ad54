package evidence

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// Every journal entry of every saga is also a leaf of one global RFC 6962
// Merkle tree, whose checkpoints (C2SP tlog-checkpoint) the server's key
// signs and publishes outside the database (internal/tlog keeps it). An
// entry's leaf names its saga, seq and hash; a checkpoint proves which
// entries the log held at its size, and a newer one that the log only
// grew.

// Checkpoint is a signed statement of the log's size and root.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   []byte
}

// Text is the checkpoint's note text (C2SP tlog-checkpoint): the origin,
// the size in decimal and the root in base64, a line each.
func (c Checkpoint) Text() string {
	return c.Origin + "\n" + strconv.FormatInt(c.Size, 10) + "\n" + base64.StdEncoding.EncodeToString(c.Root) + "\n"
}

var hasher = rfc6962.DefaultHasher

// LeafData is what a journal entry is in the log: its saga, its seq in
// decimal and its hash in hex, each written as its byte length in
// decimal, a colon and its bytes, with nothing between (as the chain
// writes fields). So a proof of inclusion names which entry of which saga
// it proves, and one entry can be logged only as itself.
func LeafData(sagaID string, seq int64, hash string) []byte {
	var b []byte
	for _, f := range []string{sagaID, strconv.FormatInt(seq, 10), hash} {
		b = append(strconv.AppendInt(b, int64(len(f)), 10), ':')
		b = append(b, f...)
	}
	return b
}

// LeafHash is the log's leaf hash of a journal entry: RFC 6962's hash of
// its LeafData. An *Error for an entry hash that is not 64 lowercase hex
// digits.
func LeafHash(e Entry) ([]byte, error) {
	if b, err := hex.DecodeString(e.Hash); err != nil || len(b) != sha256.Size || strings.ToLower(e.Hash) != e.Hash {
		return nil, errorf("entry hash %q is not 64 lowercase hex digits", e.Hash)
	}
	return hasher.HashLeaf(LeafData(e.SagaID, e.Seq, e.Hash)), nil
}

// OpenCheckpoint checks a signed checkpoint with the verifier and reads
// it. An *Error when the signature or the text is not right.
func OpenCheckpoint(signed string, v note.Verifier) (Checkpoint, error) {
	n, err := note.Open([]byte(signed), note.VerifierList(v))
	if err != nil {
		return Checkpoint{}, &Error{Msg: "the checkpoint's signature does not verify with " + v.Name(), Err: err}
	}
	lines := strings.SplitN(n.Text, "\n", 4)
	if len(lines) < 4 {
		return Checkpoint{}, errorf("not a checkpoint: want origin, size and root lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	root, rerr := base64.StdEncoding.DecodeString(lines[2])
	switch {
	case lines[0] != v.Name():
		return Checkpoint{}, errorf("checkpoint of origin %q, not %q", lines[0], v.Name())
	case err != nil || size < 0:
		return Checkpoint{}, errorf("checkpoint size %q is not a number", lines[1])
	case rerr != nil || len(root) != sha256.Size:
		return Checkpoint{}, errorf("checkpoint root is not a base64 SHA-256")
	}
	return Checkpoint{Origin: lines[0], Size: size, Root: root}, nil
}

// VerifyConsistency checks that the log old signed is a prefix of the log
// new signed, with their consistency proof (RFC 6962). An *Error when
// not.
func VerifyConsistency(old, new Checkpoint, pr [][]byte) error {
	if old.Size > new.Size {
		return errorf("the older checkpoint (size %d) is larger than the newer (size %d)", old.Size, new.Size)
	}
	if err := proof.VerifyConsistency(hasher, uint64(old.Size), uint64(new.Size), pr, old.Root, new.Root); err != nil {
		return &Error{Msg: fmt.Sprintf("the log at size %d is not a prefix of the log at size %d: the log was rewritten", old.Size, new.Size), Err: err}
	}
	return nil
}

// VerifyProofs checks that each entry ps covers is the leaf it names of
// the tree of ps.TreeSize with root. It returns the index of the first
// entry whose proof fails (-1 when none does) and how many entries were
// proved.
func VerifyProofs(entries []Entry, ps *Proofs, root []byte) (bad, proved int) {
	for i, en := range entries {
		if ps.Of[i] == nil {
			continue
		}
		leaf, err := LeafHash(en)
		if err != nil || en.Leaf < 0 || proof.VerifyInclusion(hasher, uint64(en.Leaf), uint64(ps.TreeSize), leaf, ps.Of[i], root) != nil {
			return i, proved
		}
		proved++
	}
	return -1, proved
}
