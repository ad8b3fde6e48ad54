package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"github.com/sagacity-go/sagacity/wire"
)

// Team health: the people the server knows (each console sign-in, the
// configured tokens, dev mode's demo people), and whether they can meet
// each rule of the policy in force between them, or a pending request's
// rule, its requester and initiator left out. A rule nobody known can
// meet is shown on the policy page and a pending request's page, counted
// in the metrics and told once (policy.unmeetable), instead of its
// requests waiting until they expire. It decides nothing: who may vote
// stays the rule's and access.go's.

// Person is someone the server knows: an identity with its roles and
// groups, as its newest sign-in gave them, and when that was (zero for
// a person the configuration names, such as a token).
type Person struct {
	ID, Name string
	Auth     AuthMethod
	Roles    []Role
	Groups   []string
	SeenAt   time.Time
}

// MaxPeople bounds the people the server reads (the most recently seen
// first): team health speaks of them.
const MaxPeople = 10_000

// peopleFor is how long the people read stay this process's view of
// them: every page of a request asks, so they are not read each time.
// A sign-in on this process is seen at once; on another, within it.
const peopleFor = 10 * time.Second

// people is this process's view of the people known, read from the
// store at most every peopleFor.
type people struct {
	mu     sync.Mutex
	static []Person // the configured ones (WithPeople)
	read   []Person
	at     time.Time
}

// WithPeople makes ps known without a sign-in: the configured tokens in
// tokens mode, the demo's people in dev mode. A sign-in of the same
// identity counts instead.
func WithPeople(ps []Person) Option {
	return func(e *Engine) { e.people.static = ps }
}

// SignedIn records that p signed in to the console: the server knows
// them, with their roles and groups, from then on. Nothing for an
// anonymous dev-mode caller. Errors: Unavailable when the store is.
func (e *Engine) SignedIn(ctx context.Context, p Principal) error {
	if p.Anonymous {
		return nil
	}
	if err := validName("principal", p.ID); err != nil {
		return &Error{Kind: Invalid, Msg: "no identity to record", Err: err}
	}
	err := e.store.RecordPerson(ctx, Person{ID: p.ID, Name: p.Name, Auth: p.Auth, Roles: p.Roles, Groups: p.Groups, SeenAt: Truncate(e.now())})
	if err == nil {
		e.people.mu.Lock()
		e.people.at = time.Time{} // read them again
		e.people.mu.Unlock()
	}
	return err
}

// knownPeople returns the people the server knows: those who signed in (their
// newest sign-in), then the configured ones who did not. Errors:
// Unavailable when the store is.
func (e *Engine) knownPeople(ctx context.Context) ([]Person, error) {
	ps := &e.people
	ps.mu.Lock()
	defer ps.mu.Unlock()
	now := e.now()
	if ps.at.IsZero() || now.Sub(ps.at) >= peopleFor || now.Before(ps.at) {
		read, err := e.store.People(ctx, MaxPeople)
		if err != nil {
			return nil, err
		}
		ps.read, ps.at = read, now
	}
	out := slices.Clone(ps.read)
	for _, s := range ps.static {
		if !slices.ContainsFunc(ps.read, func(p Person) bool { return p.ID == s.ID }) {
			out = append(out, s)
		}
	}
	return out, nil
}

// RuleHealth is whether the people known can meet a rule of the policy
// in force.
type RuleHealth struct {
	// Where is where the rule stands: "default" or "tool <name>".
	Where string
	Rule  Rule
	// Eligible are the known people who may vote under it, by identity.
	Eligible []string
	// Unmeetable is set when some request under it could not be met:
	// the eligible cannot meet it between them, or not without a known
	// agent among them, whose own requests they then cannot approve.
	Unmeetable bool
	// Says it for people: "can be met by 3 known people"; "cannot be
	// met: it takes 2 of finance, and only alice is known in finance".
	Says string
}

// Health says, of each rule of the policy in force, whether the people
// known can meet it. Errors: Forbidden as Can says for ActReview;
// Unavailable when the store is.
func (e *Engine) Health(ctx context.Context, p Principal) ([]RuleHealth, error) {
	if err := e.Can(p, ActReview, Subject{}); err != nil {
		return nil, err
	}
	return e.health(ctx)
}

func (e *Engine) health(ctx context.Context) ([]RuleHealth, error) {
	known, err := e.knownPeople(ctx)
	if err != nil {
		return nil, err
	}
	var out []RuleHealth
	for where, r := range e.policy().All() {
		h := RuleHealth{Where: where, Rule: r}
		voters := eligible(r, known, nil)
		for _, v := range voters {
			h.Eligible = append(h.Eligible, v.ID)
		}
		h.Says, h.Unmeetable = meetableBy(r, voters)
		out = append(out, h)
	}
	return out, nil
}

// eligible are the people of known who may vote under rule r (the
// approver role and one of its approvers), but those of left out.
func eligible(r Rule, known []Person, out []string) []Person {
	var ps []Person
	for _, p := range known {
		if slices.Contains(p.Roles, RoleApprover) && r.Eligible(p.Roles, p.Groups) && !slices.Contains(out, p.ID) {
			ps = append(ps, p)
		}
	}
	return ps
}

// meetableBy says whether voters can meet rule r between them, for any
// requester: not when they cannot at all, nor when they cannot without
// an agent among them, who never decides its own requests.
func meetableBy(r Rule, voters []Person) (string, bool) {
	if !r.Meetable(eligibilities(voters)) {
		return "cannot be met: " + short(r, voters), true
	}
	var agents []string
	for _, v := range voters {
		if slices.Contains(v.Roles, RoleAgent) && !r.Meetable(eligibilities(without(voters, v.ID))) {
			agents = append(agents, v.ID)
		}
	}
	if len(agents) > 0 {
		return fmt.Sprintf("cannot be met for a request of %s: it takes %s, and without %s only %s", strings.Join(agents, " or "),
			r.Who(), strings.Join(agents, " or "), who(without(voters, agents...))), true
	}
	return fmt.Sprintf("can be met by %d known %s", len(voters), plural(len(voters), "person", "people")), false
}

// short says who of voters may meet each requirement of rule r, which
// they cannot meet between them.
func short(r Rule, voters []Person) string {
	if r.Thresholds == nil {
		return fmt.Sprintf("it takes %s, and %s", r.Who(), who(voters))
	}
	var parts []string
	for _, alt := range r.Thresholds {
		for _, q := range alt {
			var in []Person
			for _, v := range voters {
				if q.From == "" || slices.Contains(v.Roles, Role(q.From)) || slices.Contains(v.Groups, q.From) {
					in = append(in, v)
				}
			}
			parts = append(parts, fmt.Sprintf("%d from %s (%s)", q.Count, q.Label(r), names(in)))
		}
	}
	return "it takes " + r.Who() + "; known: " + strings.Join(parts, ", ")
}

// who names voters as a clause: "only alice may vote under it";
// "nobody known may vote under it".
func who(voters []Person) string {
	if len(voters) == 0 {
		return "nobody known may vote under it"
	}
	return "only " + names(voters) + " may vote under it"
}

func names(ps []Person) string {
	if len(ps) == 0 {
		return "nobody known"
	}
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return strings.Join(ids, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func without(ps []Person, ids ...string) []Person {
	return slices.DeleteFunc(slices.Clone(ps), func(p Person) bool { return slices.Contains(ids, p.ID) })
}

func eligibilities(ps []Person) []evidence.Eligibility {
	out := make([]evidence.Eligibility, len(ps))
	for i, p := range ps {
		out[i] = evidence.Eligibility{Roles: p.Roles, Groups: p.Groups}
	}
	return out
}

// unmeetable says why the people known cannot meet what a pending
// request still needs under rule r (its votes standing as t), its
// requester and initiator left out, as neither decides it; "" when they
// can.
func (e *Engine) unmeetable(ctx context.Context, r Rule, t Tally, requester, initiator string) (string, error) {
	if t.Met() {
		return "", nil
	}
	known, err := e.knownPeople(ctx)
	if err != nil {
		return "", err
	}
	out := append([]string{requester, initiator}, t.Voters()...)
	voters := eligible(r, known, out)
	// What is still short: each requirement's places not met yet.
	rest := r
	rest.Thresholds = nil
	for _, alt := range t.Requirements() {
		var need []evidence.Requirement
		for _, s := range alt {
			if n := s.Short(); n > 0 {
				need = append(need, evidence.Requirement{From: s.From, Count: n})
			}
		}
		rest.Thresholds = append(rest.Thresholds, need)
	}
	if rest.Meetable(eligibilities(voters)) {
		return "", nil
	}
	by := requester + ", its requester and initiator, never decides it"
	if initiator != requester {
		by = requester + " (its requester) and " + initiator + " (its initiator) never decide it"
	}
	return fmt.Sprintf("the people known cannot meet this request's rule %s: it takes %s, %s, and besides them %s", r.Name, r.Who(),
		by, who(voters)), nil
}

// noticeHealth tells, once, of each rule of the policy in force that the
// people known cannot meet (policy.unmeetable): again only when what it
// says changes (another person signed in, and it still cannot be met).
// Before anyone is known (a server nobody signed in to yet) it tells
// nothing: every rule would be unmeetable, and that says nothing of the
// team.
func (e *Engine) noticeHealth(ctx context.Context) error {
	if known, err := e.knownPeople(ctx); err != nil || len(known) == 0 {
		return err
	}
	hs, err := e.health(ctx)
	if err != nil {
		return err
	}
	for _, h := range hs {
		if !h.Unmeetable {
			continue
		}
		sum := sha256.Sum256([]byte(e.policy().Hash + "\n" + h.Where + "\n" + h.Rule.Name + "\n" + h.Says))
		ev := OutboxEvent{Key: "policy/unmeetable/" + hex.EncodeToString(sum[:8]), At: Truncate(e.now()),
			Event: wire.Event{Type: wire.EventUnmeetable, Rule: h.Rule.Name}}
		if err := e.noticeOnce(ctx, ev.said("approval rule %s (%s) %s", h.Rule.Name, h.Where, h.Says)); err != nil {
			return err
		}
	}
	return nil
}

// unmeetableRules counts the rules of the policy in force the people
// known cannot meet, as the metrics say.
func (e *Engine) unmeetableRules(ctx context.Context) (int, error) {
	hs, err := e.health(ctx)
	n := 0
	for _, h := range hs {
		if h.Unmeetable {
			n++
		}
	}
	return n, err
}
