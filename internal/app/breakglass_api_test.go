package app_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// TestBreakGlassAPI: over the JSON API (every answer held to the OpenAPI
// document), an on-call token breaks the glass on a pending request with
// a reason, and it is executed; without a reason, or for a token outside
// breakGlass, nothing is; sagacity_break_glass_unratified counts it
// until an approver ratifies it, and the journal names both.
func TestBreakGlassAPI(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, dbURL string) {
		policy := compile(t, engine.PolicySpec{Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {{Name: "one"}}},
			BreakGlass: &engine.BreakGlassSpec{Approvers: []string{"oncall"}, RatifyWithin: engine.Duration(time.Hour)}})
		agentT, agentTok := token("agent", engine.RoleAgent)
		apprT, apprTok := token("approver", engine.RoleApprover)
		oncallT, oncallTok := token("oncall", engine.RoleApprover)
		oncallT.Groups = []string{"oncall"}
		e := newAPI(t, dbURL, envOptions{approvals: policy, tokens: []auth.Token{agentT, apprT, oncallT}})
		as := func(tok, what, path, body string, code int) string {
			t.Helper()
			r := e.do("POST", path, js, body, bearer(tok)...)
			want(t, what, r, code)
			return r.body
		}
		as(agentTok, "the gated call", "/sagacity/sagas/bg/calls", callJSON("sendWireTransfer", transfer), 202)
		const glass = "/sagacity/approvals/bg/1/break-glass"
		as(oncallTok, "break-glass without a reason", glass, `{}`, 400)
		as(apprTok, "break-glass by an approver outside breakGlass", glass, `{"reason":"urgent"}`, 403)
		if body := as(oncallTok, "break-glass", glass, `{"reason":"the bank closes"}`, 200); !strings.Contains(body, `"decision":"break-glass"`) ||
			!strings.Contains(body, `"approverIdentity":"token:oncall"`) {
			t.Errorf("break-glass = %s; want the decision, by token:oncall", body)
		}
		unratified := func(want float64) {
			t.Helper()
			if got, ok := s("sagacity_break_glass_unratified").value(e.scrape(apprTok)); !ok || got != want {
				t.Errorf("sagacity_break_glass_unratified = %v (found: %t); want %v", got, ok, want)
			}
		}
		unratified(1)
		as(oncallTok, "a ratification by who broke the glass", "/sagacity/approvals/bg/1/ratify", `{}`, 403)
		if body := as(apprTok, "the ratification", "/sagacity/approvals/bg/1/ratify", `{"reason":"checked"}`, 200); !strings.Contains(body, `"decision":"ratified"`) ||
			!strings.Contains(body, `"votes":1`) {
			t.Errorf("the ratification = %s; want vote 1 of 1", body)
		}
		unratified(0)
		r := e.do("GET", "/sagacity/audit/bg/verify", "", "", bearer(apprTok)...)
		if want := "resumed by break-glass (token:oncall), ratified by token:approver"; r.code != 200 || !strings.Contains(r.body, want) {
			t.Errorf("verify = %d %s; want it valid, saying %q", r.code, r.body, want)
		}
	})
}
