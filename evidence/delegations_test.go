package evidence

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// TestReadDelegations: DelegationSaga's journal reads only as delegations
// and revocations the key signed, each delegation well formed, each
// revocation of one standing, by its delegator or delegate; Delegated
// says why a vote does not stand on one.
func TestReadDelegations(t *testing.T) {
	s, v := testKey(t)
	_, other := testKey(t)
	at := t0
	entry := func(seq int64, tool string, rec DelegationRecord, signer note.Signer) Entry {
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		signed, err := note.Sign(&note.Note{Text: DelegationNotes.EntryNote(tool, string(b))}, signer)
		if err != nil {
			t.Fatal(err)
		}
		return Entry{SagaID: DelegationSaga, Seq: seq, ToolName: tool, Phase: PhaseExecuted, Input: string(b), Timestamp: at.Add(time.Duration(seq) * time.Second),
			Payload: Lines{{KeyRequester, rec.From}, {KeyReceipt, base64.StdEncoding.EncodeToString(signed)}}.String()}
	}
	d := Delegation{From: "alice", To: "carol", Rules: []string{"large"}, Roles: []Role{RoleApprover}, Groups: []string{"finance"},
		Start: at, Until: at.Add(24 * time.Hour)}
	lent := entry(1, Delegated, d.Record(), s)
	revoke := func(by string) Entry {
		return entry(2, DelegationRevoked, DelegationRecord{From: "alice", To: "carol", Seq: 1, By: by}, s)
	}
	with := func(f func(*Delegation)) Entry {
		e := d
		f(&e)
		return entry(1, Delegated, e.Record(), s)
	}
	for _, c := range []struct {
		name    string
		entries []Entry
		want    string // in the error; "" for none
	}{
		{"a delegation", []Entry{lent}, ""},
		{"revoked by its delegate", []Entry{lent, revoke("carol")}, ""},
		{"signed by another key", []Entry{entry(1, Delegated, d.Record(), func() note.Signer { s, _ := testKey(t); return s }())}, "its signature does not verify"},
		{"revoked by a third person", []Entry{lent, revoke("bob")}, "revoked by bob, neither its delegator nor its delegate"},
		{"revoked twice", []Entry{lent, revoke("alice"), entry(3, DelegationRevoked, DelegationRecord{From: "alice", To: "carol", Seq: 1, By: "alice"}, s)},
			"it revokes seq=1 again"},
		{"a revocation of none", []Entry{revoke("alice")}, "it revokes seq=1, no delegation from alice to carol"},
		{"to oneself", []Entry{with(func(e *Delegation) { e.To = "alice" })}, "alice cannot delegate to themselves"},
		{"over 90 days", []Entry{with(func(e *Delegation) { e.Until = at.Add(91 * 24 * time.Hour) })}, "a delegation stands at most"},
		{"a rule twice", []Entry{with(func(e *Delegation) { e.Rules = []string{"large", "large"} })}, "names each approval rule once"},
		{"by no approver", []Entry{with(func(e *Delegation) { e.Roles = []Role{RoleAuditor} })}, "alice has no approver role to delegate"},
	} {
		_, err := ReadDelegations(c.entries, v)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("ReadDelegations(%s) = %v; want %q", c.name, err, c.want)
		}
	}
	if _, err := ReadDelegations([]Entry{lent}, other); err == nil {
		t.Errorf("ReadDelegations with another key = nil; want its signature refused")
	}

	ds, err := ReadDelegations([]Entry{lent, revoke("carol")}, v)
	if err != nil {
		t.Fatal(err)
	}
	revoked := ds[1].Revoked
	rule := Rule{Name: "large", Approvers: []string{"finance", "security"}}
	vote := Receipt{Decider: "carol", OnBehalfOf: "alice", Delegation: 1, EligibleAs: "finance", Time: revoked.Add(-time.Millisecond)}
	for _, c := range []struct {
		name string
		r    func(Receipt) Receipt
		rule Rule
		want string
	}{
		{"a vote it covers", func(r Receipt) Receipt { return r }, rule, ""},
		{"another delegation", func(r Receipt) Receipt { r.Delegation = 2; return r }, rule, "which is not there"},
		{"another delegate", func(r Receipt) Receipt { r.Decider = "dave"; return r }, rule, "is from alice to carol"},
		{"another rule", func(r Receipt) Receipt { return r }, Rule{Name: "small", Approvers: []string{"finance"}}, "does not name rule small"},
		{"after its revocation", func(r Receipt) Receipt { r.Time = revoked; return r }, rule, "was revoked at"},
		{"before its window", func(r Receipt) Receipt { r.Time = at.Add(-time.Second); return r }, rule, "outside delegation seq=1's window"},
		{"as a group it did not lend", func(r Receipt) Receipt { r.EligibleAs = "security"; return r }, rule, `eligible as "security"`},
	} {
		if got := ds.Delegated(c.r(vote), c.rule); c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("Delegated(%s) = %q; want %q", c.name, got, c.want)
		}
	}
	for at, want := range map[time.Time]string{at.Add(-time.Second): "not started", at: "standing", revoked: "revoked"} {
		if got := ds[1].State(at); got != want {
			t.Errorf("State(%s) = %q; want %q", at, got, want)
		}
	}
	if got := (Delegation{Start: at, Until: at.Add(time.Hour)}).State(at.Add(time.Hour)); got != "ended" {
		t.Errorf("State(at its end) = %q; want ended", got)
	}
}
