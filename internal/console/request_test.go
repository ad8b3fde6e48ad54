package console

import (
	"reflect"
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/web/templates"
)

// TestDecisions: the request page's one table of decisions has a row for
// each action the engine's Actions can offer, and each row reads the flag
// of its own action: a flag added to engine.Actions without a row, or two
// rows reading one flag, fails here.
func TestDecisions(t *testing.T) {
	flags := map[string]engine.Action{"Approve": engine.ActApprove, "Reject": engine.ActReject, "Dismiss": engine.ActDismiss,
		"Execute": engine.ActResume, "Withdraw": engine.ActWithdraw, "RequestChanges": engine.ActRequestChanges,
		"BreakGlass": engine.ActBreakGlass, "Ratify": engine.ActRatify}
	// Flags that say how an action is taken, not which one.
	how := map[string]bool{"ReasonRequired": true, "Passkey": true}
	typ := reflect.TypeFor[engine.Actions]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type.Kind() != reflect.Bool || how[f.Name] {
			continue
		}
		want, ok := flags[f.Name]
		if !ok {
			t.Errorf("engine.Actions offers %s, which no decision of the request page takes", f.Name)
			continue
		}
		var a templates.Actions
		reflect.ValueOf(&a.Actions).Elem().Field(i).SetBool(true)
		var offered []engine.Action
		for _, d := range decisions {
			if d.offered(a) {
				offered = append(offered, d.action)
			}
		}
		if len(offered) != 1 || offered[0] != want {
			t.Errorf("with only Actions.%s, the page offers %v; want %s alone", f.Name, offered, want)
		}
	}
	names := map[string]bool{}
	for _, d := range decisions {
		if names[d.name] || d.verb == "" {
			t.Errorf("decision %q is in the table twice, or asks for confirmation with no verb", d.name)
		}
		names[d.name] = true
	}
}
