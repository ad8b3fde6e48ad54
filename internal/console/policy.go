package console

import (
	"net/http"
	"slices"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/web/templates"
)

// Policy is the approval policy page: GET /policy. It shows the rules in
// force per tool, and every policy document that took effect, newest
// first, with its hash (what requests pin) and the entry of the server's
// own saga that keeps it in the log; and whether the people the server
// knows can meet each rule in force (team health).
func (h *Handlers) Policy(w http.ResponseWriter, r *http.Request) error {
	ph, err := h.Engine.Policies(r.Context(), auth.From(r.Context()))
	if err != nil {
		return err
	}
	docs, inForce := ph.Documents, ph.InForce
	health, err := h.Engine.Health(r.Context(), auth.From(r.Context()))
	if err != nil {
		return err
	}
	v := templates.PolicyPage{Chrome: h.chrome(r, "Approval policy", "/policy"), InForce: inForce}
	for _, p := range ph.Proposals {
		v.Proposals = append(v.Proposals, templates.PolicyProposal{Hash: p.Hash, Since: h.when(p.Since),
			Href: templates.RequestHref(engine.PolicySaga, p.Request)})
	}
	for _, rh := range health {
		v.Health = append(v.Health, templates.RuleHealth{Where: rh.Where, Rule: rh.Rule.Name, Says: rh.Says, Unmeetable: rh.Unmeetable})
	}
	for _, d := range slices.Backward(docs) {
		a, err := engine.ParsePolicy(d.Text)
		doc := templates.PolicyDoc{Hash: d.Hash, Since: h.when(d.Since), Current: d.Hash == inForce,
			Href: templates.EntryHref(engine.PolicySaga, d.Seq), Text: d.Text}
		switch {
		case d.Request != 0:
			doc.How = "Approved under the policyChange rules of the policy before it."
			doc.ApprovedHref = templates.RequestHref(engine.PolicySaga, d.Request)
		case d.Seq == docs[0].Seq:
			doc.How = "The first document on this database: it took effect with no policy before it to approve it."
		default:
			doc.How = "Took effect when a server started with it: the policy before it has no policyChange rules."
		}
		if err != nil {
			doc.Problem = message(err)
		} else {
			doc.Rules = policyRules(a)
		}
		v.Documents = append(v.Documents, doc)
	}
	return render(w, r, http.StatusOK, templates.Policy(v))
}

// policyRules lists a policy's rules, each tool's, then the default's.
func policyRules(a *engine.Approvals) []templates.PolicyRules {
	show := func(owner string, rs []engine.Rule) templates.PolicyRules {
		out := templates.PolicyRules{Owner: owner}
		for _, r := range rs {
			out.Rules = append(out.Rules, templates.PolicyRule{Name: r.Name, When: r.When, Who: r.Who(),
				Expires: r.Expires, Grant: r.Grant, StepUp: r.StepUp, NotBefore: r.NotBefore, ReasonRequired: r.ReasonRequired})
		}
		return out
	}
	var out []templates.PolicyRules
	for _, tool := range a.Tools() {
		out = append(out, show(tool, a.Rules(tool)))
	}
	return append(out, show("", a.Default()))
}
