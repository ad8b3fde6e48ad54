package storetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// The people the server knows, for team health.

func testPeople(t *testing.T, d *drv) {
	a, b := d.id("a"), d.id("b")
	record := func(p engine.Person) {
		t.Helper()
		if err := d.db.RecordPerson(t.Context(), p); err != nil {
			t.Fatalf("RecordPerson(%+v): %v", p, err)
		}
	}
	read := func(what string, limit int, want ...engine.Person) {
		t.Helper()
		for i := range want {
			want[i].SeenAt = stored(want[i].SeenAt)
		}
		got, err := d.db.People(t.Context(), limit)
		if diff := cmp.Diff(want, got, exact...); err != nil || diff != "" {
			t.Errorf("People(%d) %s = %v; (-want +got):\n%s", limit, what, err, diff)
		}
	}
	first := engine.Person{ID: a, Name: "Alice", Auth: engine.AuthOIDC, Roles: []engine.Role{engine.RoleApprover, engine.RoleAuditor},
		Groups: []string{"finance", "ops team"}, SeenAt: when(10)}
	record(first)
	read("after a sign-in", 10, first)
	newer := first
	newer.Groups, newer.SeenAt = nil, when(20).In(zone)
	record(newer)
	read("after a newer sign-in: its groups replace the first's, in UTC", 10, newer)
	record(first)
	read("after an older sign-in written late: the newer stands", 10, newer)
	other := engine.Person{ID: b, Auth: engine.AuthDev, Roles: []engine.Role{engine.RoleAgent}, SeenAt: when(30)}
	record(other)
	read("of two, the most recently seen first", 10, other, newer)
	read("of two, at most one", 1, other)
}
