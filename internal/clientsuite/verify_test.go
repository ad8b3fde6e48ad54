package client_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/client"
)

// TestVerifyExport: what AuditProofs returned verifies offline with the
// server's key and a checkpoint, as sagacity verify checks it: the chain,
// the receipts, the votes against the pinned policy, the signed head and
// every proof. An export altered on the way, or a checkpoint the key did
// not sign, does not verify; one that cannot be checked as asked is an
// error.
func TestVerifyExport(t *testing.T) {
	s := newServer(t, sqliteURL(t.TempDir()))
	ctx := t.Context()
	agent, approver, auditor := s.as("agent"), s.as("approver"), s.as("auditor")
	const in = `{"amount":"5","to":"bob"}`
	gated, err := agent.Call(ctx, "paid", wire, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := approver.Approve(ctx, "paid", gated.JournalSeq, "checked"); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Resume(ctx, "paid", gated.JournalSeq, in); err != nil {
		t.Fatal(err)
	}
	s.sequence(t)
	keys, err := auditor.Keys(ctx)
	if err != nil || len(keys) != 1 {
		t.Fatalf("Keys() = %q, %v; want one key", keys, err)
	}
	cp, err := auditor.Checkpoint(ctx, client.Latest)
	if err != nil {
		t.Fatal(err)
	}
	proved, err := auditor.AuditProofs(ctx, "paid", client.Latest)
	if err != nil {
		t.Fatal(err)
	}
	v, err := client.VerifyExport(proved, keys[0], cp)
	if err != nil || !v.Valid || v.EntryCount != 4 || !strings.Contains(v.Message, "all 4 entries verified; seq=1 (rule ") ||
		!strings.Contains(v.Message, "approved by token:approver; 4 in the log the checkpoint of size") {
		t.Fatalf("VerifyExport(AuditProofs(paid)) = %+v, %v; want all 4 entries verified, approved by token:approver, in the log", v, err)
	}

	// altered is the export with f applied to a copy of it.
	altered := func(f func(p *client.Proved)) client.Proved {
		p := proved
		p.Entries, p.Policies = slices.Clone(p.Entries), slices.Clone(p.Policies)
		f(&p)
		return p
	}
	for _, tt := range []struct {
		name string
		p    client.Proved
		cp   string
		want string
	}{
		{"the approved bytes rewritten", altered(func(p *client.Proved) { p.Entries[0].Input = `{"amount":"5000","to":"mallory"}` }), cp,
			"hash mismatch at seq=1 (entry 0)"},
		{"its tail cut", altered(func(p *client.Proved) { p.Entries = p.Entries[:3] }), cp,
			"the export ends at seq=3, but the server exported the saga up to seq=4"},
		{"its head dropped", altered(func(p *client.Proved) { p.Head = "" }), cp, "the export carries no signed head"},
		{"its policy line dropped", altered(func(p *client.Proved) { p.Policies = nil }), cp, "its document is not in the export"},
		{"a checkpoint the key did not sign", proved, strings.Replace(cp, "\n\n— ", "\n\n— x", 1), "the checkpoint: "},
	} {
		v, err := client.VerifyExport(tt.p, keys[0], tt.cp)
		if err != nil || v.Valid || !strings.Contains(v.Message, tt.want) {
			t.Errorf("VerifyExport(%s) = %+v, %v; want it broken: %s", tt.name, v, err, tt.want)
		}
	}
	if _, err := client.VerifyExport(proved, "not a key", cp); err == nil {
		t.Errorf("VerifyExport(a key that is none) = nil error; want one")
	}
	if _, err := client.VerifyExport(client.Proved{}, keys[0], cp); err == nil || !strings.Contains(err.Error(), "holds no journal entries") {
		t.Errorf("VerifyExport(no entries) = %v; want an error: no entries", err)
	}
}
