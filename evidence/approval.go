package evidence

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
)

// An approval policy says who must approve a request of an IRREVERSIBLE
// tool, how many of them, and until when: per tool and as a default, an
// ordered list of rules, the first whose condition holds for the exact
// request applying. A condition that cannot be evaluated for a request
// refuses it, unless its rule says onError: skip: otherwise the requester
// would pick its own rule, by sending what makes a stricter rule's
// condition fail. It is compiled once, at start-up; a policy that does
// not compile is refused, naming the tool, the rule and the column.

// RuleSpec is one rule as the configuration writes it.
type RuleSpec struct {
	// Name names the rule in journals and receipts; "<tool>#<n>" (or
	// "default#<n>") when empty, n counting from 1.
	Name string `json:"name,omitempty"`
	// When is a CEL condition over payload (the input parsed as a JSON
	// object), tool, saga and requester, and the request's context (who,
	// now, tz, sameGroup: see Context); empty, the rule always applies.
	When string `json:"when,omitempty"`
	// OnError says what a condition that cannot be evaluated for a
	// request (an error, a cost over the bound, input that is no JSON
	// object) does: OnErrorRefuse, the gate refuses the request;
	// OnErrorSkip, the rule does not apply and the next one is tried.
	// OnErrorRefuse when empty; the canonical document says it for
	// every rule with a condition.
	OnError string `json:"onError,omitempty"`
	// Approvers are the roles or groups whose members may vote; the
	// approver role when empty.
	Approvers []string `json:"approvers,omitempty"`
	// Quorum is how many distinct people must approve; 1 when 0 and
	// the rule has no Thresholds.
	Quorum int `json:"quorum,omitempty"`
	// Thresholds, instead of a Quorum, are the alternative ways the rule
	// is met: it is met when every requirement of one of them is. An
	// alternative is a list of requirements, such as one from finance and
	// one from security; one person meets one requirement of each
	// alternative, never two.
	Thresholds [][]Requirement `json:"thresholds,omitempty"`
	// Expires is how long a request may wait for its quorum before the
	// server rejects it; never when 0.
	Expires Duration `json:"expires,omitempty"`
	// Grant is how long after its quorum a request may still be
	// executed; without end when 0.
	Grant Duration `json:"grant,omitempty"`
	// NotBefore is how long after its quorum a request must wait before
	// it may be executed (a wait timer); at once when 0. Shorter than
	// Grant when both are set.
	NotBefore Duration `json:"notBefore,omitempty"`
	// Reason is ReasonRequired when every vote must say why; "" when a
	// reason is optional.
	Reason string `json:"reason,omitempty"`
	// StepUp is how recent a voter's sign-in must be for the vote to
	// count; any sign-in when 0.
	StepUp Duration `json:"stepUp,omitempty"`
	// Passkey is PasskeyRequired when a vote counts only signed by the
	// voter's own passkey, over the ballot; "" when the server's receipt
	// is enough.
	Passkey string `json:"passkey,omitempty"`
	// Escalate are the steps that widen who is told of a request still
	// short of its quorum: never who may vote.
	Escalate []StepSpec `json:"escalate,omitempty"`
	// Execute is ExecuteOnApproval when the server executes the approved
	// bytes, for the requester, as soon as the quorum stands; "" when
	// the requester resumes it (approve, then resume).
	Execute string `json:"execute,omitempty"`
}

// Requirement is one requirement of a threshold: Count distinct people
// of From (a role or a group), or of any of the rule's approvers when
// From is "".
type Requirement struct {
	From  string `json:"from,omitempty"`
	Count int    `json:"count"`
}

// Label names the requirement for people: its group, or "any of a or
// b" for one open to every approver of rule r.
func (q Requirement) Label(r Rule) string {
	if q.From != "" {
		return q.From
	}
	return "any of " + strings.Join(r.Approvers, " or ")
}

// StepSpec is a step of a rule's escalation: After this long short of
// its quorum, the request is also told to the Notify endpoints.
type StepSpec struct {
	After  Duration `json:"after"`
	Notify []string `json:"notify"`
}

// MaxSteps bounds a rule's escalation.
const MaxSteps = 10

// PasskeyRequired is RuleSpec.Passkey for a rule whose votes the voter's
// passkey must sign.
const PasskeyRequired = "required"

// ReasonRequired is RuleSpec.Reason for a rule whose votes must say why.
const ReasonRequired = "required"

// ExecuteOnApproval is RuleSpec.Execute for a rule whose requests the
// server executes once approved.
const ExecuteOnApproval = "on-approval"

// RuleSpec.OnError's values.
const (
	// OnErrorRefuse: a condition that cannot be evaluated refuses the
	// request at the gate, as no rule applying does.
	OnErrorRefuse = "refuse"
	// OnErrorSkip: a condition that cannot be evaluated does not hold,
	// and the next rule is tried.
	OnErrorSkip = "skip"
)

// Duration is a length of time as a policy writes it: "30m", "2h",
// "168h". Its JSON is Go's duration text.
type Duration time.Duration

// MarshalJSON writes d as Go's duration text ("1h30m0s").
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// UnmarshalJSON reads Go's duration text.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("a duration is a string such as \"30m\"")
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// PolicySpec is the approval policy as the configuration writes it.
type PolicySpec struct {
	Default []RuleSpec            `json:"default,omitempty"`
	Tools   map[string][]RuleSpec `json:"tools,omitempty"`
	// PolicyChange are the rules of a change of the policy itself: with
	// them, a new document takes effect only once approved under them
	// (a request of PolicyTool in PolicySaga, executed by the server on
	// approval); without them, a new document takes effect when a server
	// starts with it.
	PolicyChange []RuleSpec `json:"policyChange,omitempty"`
	// Claims are the claims of a requester's token its conditions see
	// (who.claims), at most MaxClaims; none when empty.
	Claims []string `json:"claims,omitempty"`
	// TimeZone is the IANA time zone conditions read the time in (tz,
	// and the zone a request's journaled now is written in); UTC when
	// empty.
	TimeZone string `json:"timeZone,omitempty"`
	// BreakGlass lets the people it names execute a pending request
	// without its quorum, with a reason, to be ratified afterwards by the
	// rule's quorum; off when nil (and absent from the canonical
	// document, so that a document without it keeps its hash).
	BreakGlass *BreakGlassSpec `json:"breakGlass,omitempty"`
}

// BreakGlassSpec is the policy's break-glass as the configuration writes
// it: who may break the glass, and how long the rule's quorum has to
// ratify each use afterwards.
type BreakGlassSpec struct {
	// Approvers are the roles or groups whose members may break the
	// glass; they must hold the approver role besides.
	Approvers []string `json:"approvers"`
	// RatifyWithin is how long after a use its rule's quorum may ratify
	// it; unratified after that, it is flagged.
	RatifyWithin Duration `json:"ratifyWithin"`
}

// BreakGlass is a compiled policy's break-glass (see BreakGlassSpec).
type BreakGlass struct {
	Approvers    []string
	RatifyWithin time.Duration
}

// EligibleAs is the first of b's approvers (a role or a group) that a
// person holding roles, in groups, is, which the receipt of their use
// records; "" when none.
func (b BreakGlass) EligibleAs(roles []Role, groups []string) string {
	return Rule{Approvers: b.Approvers}.EligibleAs(roles, groups)
}

// Rule is a compiled rule.
type Rule struct {
	Name string
	// When is the condition as written, for people ("" for none).
	When string
	// Approvers are who may vote: the roles and groups the rule names,
	// its thresholds' too.
	Approvers []string
	// Quorum is how many approvals meet the rule; for a rule with
	// Thresholds, the fewest that can.
	Quorum int
	// Thresholds are the rule's alternatives, each a list of
	// requirements that must all be met; nil for a rule with a plain
	// Quorum of its approvers.
	Thresholds [][]Requirement
	// Expires, Grant and StepUp are 0 when the rule sets none.
	Expires, Grant, StepUp time.Duration
	// NotBefore is the wait after the quorum before an execution, 0 for
	// none.
	NotBefore      time.Duration
	ReasonRequired bool
	// PasskeyRequired: a vote counts only with an assertion of the
	// voter's enrolled passkey over its ballot.
	PasskeyRequired bool
	// Escalate are its escalation's steps, in order.
	Escalate []Step
	// SkipOnError: a condition that cannot be evaluated does not hold
	// (onError: skip); otherwise it refuses the request.
	SkipOnError bool
	// OnApproval: the server executes an approved request itself
	// (execute: on-approval), journaled as ExecutedBy.
	OnApproval bool
	// BreakGlass is the policy's break-glass, which applies to every rule
	// of a tool and of the default (never to a policy change); nil when
	// the policy has none.
	BreakGlass *BreakGlass
	prog       cel.Program // nil without a condition
}

// Step is a step of a rule's escalation: After this long since the
// request was made, short of its quorum, Notify are told too.
type Step struct {
	After  time.Duration
	Notify []string
}

// Approvals is a compiled approval policy.
type Approvals struct {
	// Text is the policy's canonical document (JSON, rules in order,
	// names and defaults filled in); Hash is its hex SHA-256, which
	// every request records.
	Text, Hash string
	tools      map[string][]Rule
	fallback   []Rule
	change     []Rule // PolicyChange's
	glass      *BreakGlass
	// contextual: a condition reads the context (UsesContext); claims
	// and zone are the policy's claims and time zone.
	contextual bool
	claims     []string
	zone       *time.Location
}

// BreakGlass is the policy's break-glass, nil when it has none.
func (a *Approvals) BreakGlass() *BreakGlass { return a.glass }

// GatesChange reports whether a change of the policy needs approval under it:
// it has policyChange rules.
func (a *Approvals) GatesChange() bool { return len(a.change) > 0 }

// Bounds on what a rule may ask.
const (
	// MaxQuorum is the largest quorum a rule may ask for, in all or in
	// one alternative of its thresholds.
	MaxQuorum = 50
	// MaxThresholds bounds a rule's alternatives, and an alternative's
	// requirements.
	MaxThresholds = 10
	// MinWindow is the shortest expiry, grant, step-up or wait window, or
	// escalation step, a server outside dev mode accepts.
	MinWindow = time.Minute
	// MinDevWindow is the shortest in dev mode (CompileDevPolicy), and in
	// a document read back (ParsePolicy).
	MinDevWindow = time.Second
	// MaxWindow is the longest expiry, grant or wait window.
	MaxWindow = 366 * 24 * time.Hour
	// MaxStepUp is the longest step-up window: no sign-in lasts longer.
	MaxStepUp = 12 * time.Hour
)

// conditionCost bounds what evaluating one condition may cost (CEL's
// cost units, roughly one per value visited).
const conditionCost = 100_000

// DefaultPolicy is the policy without configuration: one approver
// approves any request.
var DefaultPolicy = PolicySpec{Default: []RuleSpec{{Name: "default", Approvers: []string{string(RoleApprover)}, Quorum: 1}}}
