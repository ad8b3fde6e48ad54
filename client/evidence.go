package client

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/evidence/assertion"
	"golang.org/x/mod/sumdb/note"
)

// Audit exports a saga's journal, oldest entry first: GET
// /sagacity/audit/{sagaID}. An unknown saga's journal is empty.
// ErrForbidden.
func (c *Client) Audit(ctx context.Context, sagaID string) ([]Entry, error) {
	return c.audit(ctx, sagaID, nil, nil)
}

// Latest names the newest checkpoint, for AuditProofs and Checkpoint.
const Latest = 0

// AuditProofs exports a saga's journal with the inclusion proof of each
// entry in the global log at the checkpoint of treeSize (Latest for the
// newest), the policies its requests pin, its passkeys' enrolments and
// its signed head: GET
// /sagacity/audit/{sagaID}?proofs=.
// Entries the checkpoint does not reach yet carry no proof. ErrNotFound
// also when no checkpoint is signed yet, ErrInvalid for a size the log
// does not have.
func (c *Client) AuditProofs(ctx context.Context, sagaID string, treeSize int64) (Proved, error) {
	size := "latest"
	if treeSize != Latest {
		size = strconv.FormatInt(treeSize, 10)
	}
	var p Proved
	var err error
	p.Entries, err = c.audit(ctx, sagaID, url.Values{"proofs": {size}}, &p)
	return p, err
}

// audit reads an export, with package evidence's reader: its entries,
// and into p, when it is one with proofs, all of it.
func (c *Client) audit(ctx context.Context, sagaID string, query url.Values, p *Proved) ([]Entry, error) {
	a, err := c.send(ctx, http.MethodGet, sagaPath("audit", sagaID), query, nil, nil)
	if err != nil {
		return nil, err
	}
	if !a.ok() {
		return nil, newError(a)
	}
	entries, proofs, err := evidence.ReadNDJSON(bytes.NewReader(a.body))
	if err != nil {
		return nil, fmt.Errorf("sagacity: GET %s: %w", a.path, err)
	}
	x := evidence.ExportOf(entries, proofs)
	if p != nil {
		*p = x
	}
	return x.Entries, nil
}

// VerifyExport checks offline, without the server, a saga's export
// AuditProofs returned, as sagacity verify -key key -checkpoint
// checkpoint does (evidence.VerifyExport): its hash chain and the rules
// of its requests; every decision's receipt, none signed in dev mode;
// that every request met the rule of the approval policy it pinned, and
// every passkey vote its enrolment; that the export ends at the head the
// server signed; that the identity provider signed each OIDC decider's
// sign-in; and every entry's and attached line's proof of inclusion in
// the log the checkpoint signed; a break-glass execution its rule's
// quorum did not ratify by the end of its window, now, is flagged in the
// message (FLAGGED:). key is the server's public key (Keys),
// checkpoint a signed checkpoint (Checkpoint) of the size the export was
// proved against. An export that does not verify, or a checkpoint the key
// did not sign, is a Verification, not an error; an error when key is
// no public key, or the export cannot be verified as asked (no entries,
// no proofs, proofs against another size than the checkpoint's).
func VerifyExport(p Proved, key, checkpoint string) (Verification, error) {
	v, err := note.NewVerifier(key)
	if err != nil {
		return Verification{}, fmt.Errorf("sagacity: not a public key: %w", err)
	}
	cp, err := evidence.OpenCheckpoint(checkpoint, v)
	if err != nil {
		return evidence.Broken(0, -1, "the checkpoint: "+evidence.Message(err)), nil
	}
	entries, proofs, err := evidence.ReadExport(p)
	if err == nil {
		var res Verification
		res, _, err = evidence.VerifyExport(entries, proofs, evidence.Trust{Key: v, Checkpoint: &cp,
			CheckAssertion: assertion.Check, CheckIDToken: evidence.OpenIDToken, Now: time.Now()})
		if err == nil {
			return res, nil
		}
	}
	return Verification{}, fmt.Errorf("sagacity: the export: %w", err)
}

// Verify checks a saga's journal: its hash chain, the receipts of its
// decisions, and each entry against the newest checkpoint: GET
// /sagacity/audit/{sagaID}/verify. A journal that does not verify is a
// Verification, not an error; an unknown saga's is empty, and valid.
// ErrForbidden without the auditor or approver role.
func (c *Client) Verify(ctx context.Context, sagaID string) (Verification, error) {
	return do[Verification](ctx, c, http.MethodGet, sagaPath("audit", sagaID)+"/verify", nil, nil)
}

// Keys returns the public keys that receipts and checkpoints verify with
// (golang.org/x/mod/sumdb/note verifier keys): GET /sagacity/keys.
func (c *Client) Keys(ctx context.Context) ([]string, error) {
	keys, err := do[struct {
		Keys []string `json:"keys"`
	}](ctx, c, http.MethodGet, "/sagacity/keys", nil, nil)
	return keys.Keys, err
}

// Receipt downloads the signed receipt (a note) of the decision journaled
// at seq: GET /sagacity/receipts/{sagaID}/{seq}. ErrNotFound when that
// entry is no decision.
func (c *Client) Receipt(ctx context.Context, sagaID string, seq int64) (string, error) {
	return c.text(ctx, fmt.Sprintf("%s/%d", sagaPath("receipts", sagaID), seq))
}

// Log reports the global log's state: GET /sagacity/log.
func (c *Client) Log(ctx context.Context) (LogStatus, error) {
	return do[LogStatus](ctx, c, http.MethodGet, "/sagacity/log", nil, nil)
}

// Checkpoint returns the signed checkpoint (a note) of the log at size, or
// the newest for Latest: GET /sagacity/checkpoints/{size}. ErrNotFound when
// the server keeps none of that size, or none yet.
func (c *Client) Checkpoint(ctx context.Context, size int64) (string, error) {
	s := "latest"
	if size != Latest {
		s = strconv.FormatInt(size, 10)
	}
	return c.text(ctx, "/sagacity/checkpoints/"+s)
}

// Consistency returns the proof that the log at size from is a prefix of
// the log at size to: GET /sagacity/checkpoints/consistency. ErrInvalid
// unless from is at most to and to at most the log's size.
func (c *Client) Consistency(ctx context.Context, from, to int64) (ConsistencyProof, error) {
	q := url.Values{"from": {strconv.FormatInt(from, 10)}, "to": {strconv.FormatInt(to, 10)}}
	return do[ConsistencyProof](ctx, c, http.MethodGet, "/sagacity/checkpoints/consistency", q, nil)
}
