package storetest

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// The newest verification of each saga, which the audit page lists.

func mkVerified(saga string, valid bool, at int) engine.Verified {
	v := engine.Verification{Valid: true, EntryCount: 4, BreakAtIndex: -1, Message: "all 4 entries verified"}
	if !valid {
		v = engine.Verification{EntryCount: 4, BreakAtIndex: 1, Message: "hash mismatch at seq=2 (entry 1)"}
	}
	return engine.Verified{SagaID: saga, Verification: v, HeadSeq: int64(at) + 4, At: when(at)}
}

func storedVerified(vs ...engine.Verified) []engine.Verified {
	for i := range vs {
		vs[i].At = stored(vs[i].At)
	}
	return vs
}

func testRecordVerified(t *testing.T, d *drv) {
	a, b := d.id("a"), d.id("b")
	record := func(v engine.Verified) {
		t.Helper()
		if err := d.db.RecordVerified(t.Context(), v); err != nil {
			t.Fatalf("RecordVerified(%+v): %v", v, err)
		}
	}
	read := func(what string, want ...engine.Verified) {
		t.Helper()
		got, err := d.db.Verifications(t.Context(), []string{a, b})
		if diff := cmp.Diff(storedVerified(want...), got, exact...); err != nil || diff != "" {
			t.Errorf("Verifications %s = %v; (-want +got):\n%s", what, err, diff)
		}
	}
	first := mkVerified(a, true, 10)
	record(first)
	read("after the first", first)
	newer := mkVerified(a, false, 20)
	record(newer)
	read("after a newer one: it replaces the first", newer)
	record(mkVerified(a, true, 15))
	read("after an older one finished late: the newer stands", newer)
	other := mkVerified(b, true, 0)
	other.At = other.At.In(zone)
	record(other)
	read("of two sagas, in UTC", newer, other)
}

func testVerifications(t *testing.T, d *drv) {
	a, b, c := d.id("a"), d.id("b"), d.id("c")
	for _, v := range []engine.Verified{mkVerified(c, true, 1), mkVerified(a, false, 2)} {
		if err := d.db.RecordVerified(t.Context(), v); err != nil {
			t.Fatal(err)
		}
	}
	many := make([]string, engine.MaxList+1)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	tests := []struct {
		name string
		ids  []string
		want []engine.Verified
		kind *engine.Kind
	}{
		{"none asked", nil, nil, nil},
		{"by saga id, a saga never verified left out", []string{c, b, a}, []engine.Verified{mkVerified(a, false, 2), mkVerified(c, true, 1)}, nil},
		{"one never verified", []string{b}, nil, nil},
		{"more than a listing holds", many, nil, new(engine.Invalid)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.db.Verifications(t.Context(), tt.ids)
			wantErr(t, "Verifications", err, tt.kind)
			if diff := cmp.Diff(storedVerified(tt.want...), got, exact...); diff != "" {
				t.Errorf("Verifications(%d ids) (-want +got):\n%s", len(tt.ids), diff)
			}
		})
	}
}
