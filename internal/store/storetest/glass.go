package storetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// The break-glass executions not ratified yet.

// testUnratified: a use recorded (Tx.PutGlassUse) is listed until it is
// ratified (Tx.RatifyGlass), the oldest first, at most limit, its times
// in UTC; a second use of one request is refused.
func testUnratified(t *testing.T, d *drv) {
	a, b := d.id("a"), d.id("b")
	put := func(u engine.GlassUse) error {
		return d.db.Update(t.Context(), func(tx engine.Tx) error { return tx.PutGlassUse(u) })
	}
	read := func(what string, limit int, want ...engine.GlassUse) {
		t.Helper()
		for i := range want {
			want[i].At, want[i].RatifyBy = stored(want[i].At), stored(want[i].RatifyBy)
		}
		got, err := d.db.Unratified(t.Context(), limit)
		if diff := cmp.Diff(want, got, exact...); err != nil || diff != "" {
			t.Errorf("Unratified(%d) %s = %v; (-want +got):\n%s", limit, what, err, diff)
		}
	}
	read("with none", 10)
	older := engine.GlassUse{SagaID: b, JournalSeq: 3, ToolName: "sendWireTransfer", By: "olga", Reason: "payroll", At: when(10), RatifyBy: when(100)}
	newer := engine.GlassUse{SagaID: a, JournalSeq: 5, ToolName: "sendWireTransfer", By: "olga", Reason: "the bank closes", At: when(20), RatifyBy: when(110)}
	for _, u := range []engine.GlassUse{newer, older} {
		if err := put(u); err != nil {
			t.Fatalf("PutGlassUse(%+v): %v", u, err)
		}
	}
	read("of two, the oldest first", 10, older, newer)
	read("of two, at most one", 1, older)
	if err := put(older); err == nil {
		t.Errorf("PutGlassUse of a request's second use = nil error; want it refused")
	}
	if err := d.db.Update(t.Context(), func(tx engine.Tx) error { return tx.RatifyGlass(b, 3, when(50)) }); err != nil {
		t.Fatalf("RatifyGlass: %v", err)
	}
	read("once the older is ratified", 10, newer)
}
