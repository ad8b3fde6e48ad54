package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sagacity-go/sagacity/wire"
)

// Audit exports a saga's journal, oldest entry first: GET
// /sagacity/audit/{sagaID}. An unknown saga's journal is empty.
// ErrForbidden.
func (c *Client) Audit(ctx context.Context, sagaID string) ([]Entry, error) {
	return c.audit(ctx, sagaID, nil, nil)
}

// Latest names the newest checkpoint, for AuditProofs and Checkpoint.
const Latest = 0

// Proved is a saga's journal exported with its proofs, and the saga's
// head as the server exported it: a signed note (sagacity saga head v1)
// naming the seq and hash of its last entry, so that an export whose tail
// was cut on the way is caught. Policies are the entries of the server's
// saga "sagacity:policies" holding the approval policies the saga's
// requests pin, proved against the same checkpoint: what sagacity verify
// checks each request's votes against. Passkeys are the entries of its
// saga "sagacity:passkeys" enrolling and removing the passkeys the saga's
// votes were signed with, proved the same way: what binds each key to a
// person. SignIns are the entries of its saga "sagacity:sign-ins" holding
// the identity provider's signed ID tokens of the sign-ins its decisions
// and those enrolments name, and the provider keys that verify them. The
// server exports them to those who may read the policies (approvers and
// auditors), not to agents.
type Proved struct {
	Entries  []Entry
	Policies []Entry
	Passkeys []Entry
	SignIns  []Entry
	Head     string
}

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

// audit reads an export; the policy and passkey lines and the signed
// head of an export with proofs, its last lines, into p.
func (c *Client) audit(ctx context.Context, sagaID string, query url.Values, p *Proved) ([]Entry, error) {
	a, err := c.send(ctx, http.MethodGet, sagaPath("audit", sagaID), query, nil, nil)
	if err != nil {
		return nil, err
	}
	if !a.ok() {
		return nil, newError(a)
	}
	var entries []Entry
	sc := bufio.NewScanner(bytes.NewReader(a.body))
	sc.Buffer(nil, maxAnswer)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var h wire.ExportHead
		if p != nil && json.Unmarshal(sc.Bytes(), &h) == nil && h.Head != "" {
			p.Head = h.Head
			continue
		}
		var pl wire.ExportPolicy
		if p != nil && json.Unmarshal(sc.Bytes(), &pl) == nil && pl.Policy.SagaID != "" {
			p.Policies = append(p.Policies, pl.Policy)
			continue
		}
		var pk wire.ExportPasskey
		if p != nil && json.Unmarshal(sc.Bytes(), &pk) == nil && pk.Passkey.SagaID != "" {
			p.Passkeys = append(p.Passkeys, pk.Passkey)
			continue
		}
		var si wire.ExportSignIn
		if p != nil && json.Unmarshal(sc.Bytes(), &si) == nil && si.SignIn.SagaID != "" {
			p.SignIns = append(p.SignIns, si.SignIn)
			continue
		}
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("sagacity: GET %s: line %d: %w", a.path, n, err)
		}
		entries = append(entries, e)
	}
	return entries, sc.Err()
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
