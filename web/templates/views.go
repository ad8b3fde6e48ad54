package templates

import (
	"strconv"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/payload"
)

// Flash is a one-line notice at the top of a page. Its text always comes
// from the server's state, never from a link.
type Flash struct {
	Kind string // "ok", "bad" or "warn"
	Text string
}

// Chrome is what every page shares: its title, who is signed in and the
// places they may go.
type Chrome struct {
	Title string
	Me    *engine.Principal // nil when nobody is signed in
	Nav   []NavItem
	Flash Flash
	// Halted says why executions are halted (the database does not match
	// the log's newest checkpoint); shown to everyone signed in.
	Halted string
	// Glass are the break-glass executions not ratified yet, shown to
	// everyone who reviews requests; GlassUnread says why they could not
	// be read, "" when they were.
	Glass       []GlassRow
	GlassUnread string
}

// GlassRow is a break-glass execution not ratified yet, as every page's
// banner lists it.
type GlassRow struct {
	Href, Tool, Saga string
	Seq              int64
	By, Reason       string
	RatifyBy         Time
	// Overdue: its window ended unratified; verification flags it.
	Overdue bool
}

// NavItem is a link in the header.
type NavItem struct {
	Href, Label string
	Current     bool
	Count       int // shown beside the label when positive (pending, in doubt)
}

// Time is a moment shown to people: UTC, and how long ago.
type Time struct {
	UTC string // 2026-11-30 09:15:03 UTC
	ISO string // for <time datetime>
	Ago string // 3m ago
}

// Payload is an exact payload prepared for display: its bytes with every
// character a reader cannot see made visible, pretty JSON the same way,
// its hash, and what to warn the reader about.
type Payload struct {
	// Exact is the bytes in base64, for the page to hash itself before
	// a passkey signs a vote on them; "" when no passkey will.
	Exact  string
	Bytes  []payload.Segment
	Pretty []payload.Segment // nil when it is not JSON
	Size   int
	SHA256 string
	// Fingerprint is the hash's first digits in groups, which
	// notifications show too, to compare by eye.
	Fingerprint string
	Findings    []payload.Finding
}

// Diff is a comparison shown to a reviewer (payload.Compare), its
// texts revealed.
type Diff struct {
	Title    string // what is compared with what
	OldLabel string // "seq 1 of order-1002"
	OldHref  string
	// Identical: byte for byte. FormattingOnly: equal as JSON, not as
	// bytes. Changes otherwise.
	Identical, FormattingOnly bool
	Changes                   []Change
}

// Change is one difference of a Diff: its path, what happened there, and
// the values before and after, or the edits within a long text.
type Change struct {
	Path     string // "" for the whole payload
	Kind     payload.Kind
	Old, New []payload.Segment
	Edits    []Edit
}

// Edit is a run of text kept, deleted or inserted, revealed.
type Edit struct {
	Op   payload.EditOp
	Text []payload.Segment
}

// Summary is a payload's one-line summary (payload.Summary), its keys
// and values revealed.
type Summary struct {
	Fields []SummaryField
	More   int // fields, or bytes of a payload that is not JSON, it leaves out
}

// SummaryField is one field of a Summary: none of its key for a payload
// that is not JSON, and how many bytes of the key and the value it cuts.
type SummaryField struct {
	Key, Value  []payload.Segment
	KeyCut, Cut int
}

// ErrorPage is a failed request.
type ErrorPage struct {
	Chrome
	Status  int
	Message string
}

// LoginPage is the sign-in page of dev and tokens modes.
type LoginPage struct {
	Chrome
	Dev      bool // dev mode: whoever says who they are; else tokens mode
	ReturnTo string
	// StepUp is how recent a sign-in the vote that sent the person here
	// needs, "" for a plain sign-in.
	StepUp string
	// Roles are the roles a person may choose from in dev mode.
	Roles []engine.Role
	// People are signed in with one click in dev mode: the demo's.
	People []engine.Principal
}

// MePage says who is signed in and what they may do.
type MePage struct {
	Chrome
	May      []string // what the engine lets them do, in words
	MayNot   []string // and what it does not, with why
	Passkeys Passkeys
}

// Passkeys are the signed-in person's passkeys, and whether they may
// add or remove them now.
type Passkeys struct {
	Shown  bool   // for people who may vote, or have passkeys
	Off    string // why they cannot change them ("" when they can)
	Origin string // the origin passkeys work from ("" when the server has none)
	// SignIn is where to sign in again first, when the sign-in is older
	// than Within; "" when it is recent enough.
	SignIn, Within string
	Keys           []PasskeyRow
}

// PasskeyRow is one passkey.
type PasskeyRow struct {
	ID       string // the credential id
	Enrolled Time
	Seq      int64 // its enrolment's entry in the passkeys saga
	Removed  *Time // nil while it counts
}

// Ballot is a vote a passkey is about to sign: the ceremony, the options
// passkey.js hands the browser, the ballot's text, which the challenge
// commits to, and the origin passkeys work from.
type Ballot struct {
	Ceremony      string
	Options       string // JSON
	Text          string
	PayloadSHA256 string
	Origin        string
}

// PolicyPage is the approval policy: the documents that took effect,
// newest first, the one in force among them.
type PolicyPage struct {
	Chrome
	InForce   string
	Documents []PolicyDoc
	// Proposals wait for approval to take effect: each a link to its
	// request.
	Proposals []PolicyProposal
	// Health says whether the people the server knows can meet each rule
	// of the policy in force (engine.RuleHealth).
	Health []RuleHealth
}

// PolicyProposal is a policy document waiting for approval.
type PolicyProposal struct {
	Hash, Href string
	Since      Time
}

// RuleHealth is whether the people known can meet one rule.
type RuleHealth struct {
	Where, Rule, Says string
	Unmeetable        bool
}

// PolicyDoc is one policy document as it took effect.
type PolicyDoc struct {
	Hash    string
	Since   Time
	Current bool
	Href    string // its entry in the server's own saga
	// How says how it came to be in force: the first document, approved
	// (ApprovedHref its request), or put in force by a server's start.
	How, ApprovedHref string
	Text              string // the canonical document
	Rules             []PolicyRules
	Problem           string // why it cannot be read
}

// PolicyRules are the ordered rules of one tool, or of the default
// (Owner "").
type PolicyRules struct {
	Owner string
	Rules []PolicyRule
}

// PolicyRule is one rule as the policy page shows it.
type PolicyRule struct {
	Name, When string
	// Who says who must approve (evidence.Rule.Who).
	Who                    string
	Expires, Grant, StepUp time.Duration // 0 for none
	NotBefore              time.Duration // its wait timer, 0 for none
	ReasonRequired         bool
}

// NotificationsPage says how notifications stand: each endpoint's
// backlog, and the deliveries failing or given up on.
type NotificationsPage struct {
	Chrome
	Endpoints []EndpointRow
	Failing   []DeliveryRow
	// NoResend says why the person may not retry a delivery or enable an
	// endpoint, as the engine says; "" when they may.
	NoResend string
}

// EndpointRow is an endpoint and its deliveries not delivered yet.
type EndpointRow struct {
	Name   string
	Events string // what it hears of, in words
	// Escalation: it hears only of requests an escalation step names it in.
	Escalation bool
	// Gone: deliveries wait for an endpoint this server no longer has.
	Gone                     bool
	Pending, Failing, Failed int
	Oldest                   string // how long the oldest pending one waited
	LastError                string
	Disabled                 *Time // when a 410 stopped it; nil while it runs
	DisabledWhy              string
}

// DeliveryRow is one event on its way to one endpoint.
type DeliveryRow struct {
	ID                       int64
	Endpoint, Event, EventID string
	State                    string // pending, delivered, failed, refused
	Saga                     string // the request's, when it is about one
	Seq                      int64
	Href                     string
	Attempts, Status         int
	Error                    string
	Created                  Time
	Last                     *Time  // the latest attempt, nil before the first
	Next                     string // when a failing one is tried again
	Retry                    bool   // it may be made due now (pending or failed)
}

// thousands writes n with its thousands separated by commas: 2,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// DelegationsPage lists the delegations, and offers the form that makes
// one to whom the engine lets.
type DelegationsPage struct {
	Chrome
	Rows []DelegationRow
	// Rules are the names of the policy in force's rules, to delegate.
	Rules []string
	// Until is the form's default end (datetime-local, UTC); MaxDays the
	// longest a delegation stands.
	Until   string
	MaxDays int
	// NoDelegate says why the person may not delegate, as the engine
	// says; "" when they may.
	NoDelegate string
}

// DelegationRow is a delegation.
type DelegationRow struct {
	Seq          int64
	From, To     string
	Rules        string
	As           string // the delegator's groups (or roles), as the delegation records them
	Start, Until Time
	Reason       string
	State        string // standing, not started, ended or revoked
	Revoked      *Time
	RevokedBy    string
	// Revoke: the person may revoke it (its delegator or delegate).
	Revoke bool
}
