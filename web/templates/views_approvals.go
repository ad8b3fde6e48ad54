package templates

import (
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/payload"
)

// ApprovalsPage lists pending requests: the approver's home.
type ApprovalsPage struct {
	Chrome
	Filter  PendingFilter
	Tools   []string // the registered tools, for the filter
	Rows    Rows
	InDoubt int // calls in doubt, which block their sagas
}

// PendingFilter is the list's filter form, as submitted.
type PendingFilter struct {
	Tool, Saga, Initiator, State string
}

// Rows is a page of the list: the part that updates itself.
type Rows struct {
	Filter PendingFilter
	// The page's position: the cursor it follows or precedes, or Last for
	// the newest page; none for the oldest.
	After, Before string
	Last          bool
	Items         []PendingRow
	Total         int // requests the filter selects, on every page
	// The pager's URLs, "" where there is no such page: Oldest and
	// Previous on all but the oldest page, Next and Newest on all but the
	// newest.
	Oldest, Previous, Next, Newest string
	// Digest identifies what the page shows; the update loop sends it
	// back and gets nothing new until it changes.
	Digest string
}

// PendingRow is one pending request in the list.
type PendingRow struct {
	Href                 string
	SagaID               string
	Seq                  int64
	Tool                 string
	Initiator, Requester string
	Reason               string // why the requester said it asks, "" when it did not
	Requested            Time
	Summary              Summary
	// Voters are who approved it so far, of the Quorum its rule asks
	// for; Approved once they are enough, awaiting execution.
	Voters             []string
	Quorum             int
	Approved           bool
	Replanned, Refused bool
	SupersededBy       int64 // the saga's later request that replaced it, 0 when none
	Flags              int   // characters a reader cannot see or could misread
}

// RequestPage is one request with everything needed to decide it.
type RequestPage struct {
	Chrome
	// Notifications are the deliveries of the request's events, newest
	// first; none without notifications.
	Notifications []DeliveryRow
	Ref           RequestRef
	SagaHref      string
	Saga          engine.Saga
	Tool          string
	Requester     string
	Client        string // the MCP client and session that asked, if one did
	// Reason is why the requester said it asks, "" when it did not.
	Reason    string
	Ruling    Ruling
	Requested Time
	Status    RequestStatus
	Input     string // the exact bytes, for a confirmation's summary
	Payload   Payload
	Diffs     []Diff
	// WouldUndo is what a rejection compensates, newest first, and
	// StaysDone what it cannot (irreversible, executed); Siblings are the
	// other pending requests of the saga a rejection drops.
	WouldUndo, StaysDone []Step
	Siblings             []Sibling
	// SupersededBy is the saga's later request that replaced this one, 0
	// when none.
	SupersededBy int64
	// Steps are the saga's entries before the request, newest first.
	Steps        []Step
	MoreSteps    int
	TimelineHref string
	Verification engine.Verification
	Actions      Actions
	Confirm      *Confirm // set while a decision waits for confirmation
	// RejectEffects: show what rejecting it does, while the person may
	// reject it and it waits for a decision (once approved, the
	// rejection's confirmation still says it).
	RejectEffects bool
}

// Ruling is the approval rule a request is decided by, and where its
// votes stand under it.
type Ruling struct {
	// Rule is its name, When the condition that picked it ("" for a rule
	// without one), Policy the SHA-256 of the policy the request was made
	// under ("" before policies were recorded) and PolicyHref its page.
	Rule, When, Policy, PolicyHref string
	// Problem says why the rule cannot be found; nothing is decided then.
	Problem   string
	Approvers []string
	Quorum    int
	// Alternatives are where the requirements of a rule with thresholds
	// stand, an alternative each; nil for a plain quorum.
	Alternatives [][]Requirement
	// Saw says what the rule's conditions saw of who asked and when, for
	// a request under a policy that reads them ("" otherwise).
	Saw string
	// ReasonRequired: every vote must say why. StepUp: votes count only
	// from a sign-in within it.
	ReasonRequired bool
	StepUp         string
}

// Requirement is where one requirement of a rule's thresholds stands:
// Count people of Label, of whom Voters approved.
type Requirement struct {
	Label  string
	Count  int
	Voters []string
}

// RequestRef names a request in forms and in the update loop.
type RequestRef struct {
	Saga   string
	Seq    int64
	Hash   string // of the bytes shown: a decision is about these bytes
	Digest string // of the status shown
}

// RequestStatus is what became of a request, in words, with its evidence.
type RequestStatus struct {
	State     engine.RequestState
	Headline  string // "Approved by alice@example.com, awaiting execution"
	Kind      string // "ok", "bad", "warn" or "" (undecided)
	Decisions []Decision
	Outcome   *Step // the execution's EXECUTED or FAILED entry
	// ExecutedBy is who executed it, at ExecutedAt, once someone did;
	// Next, while it is approved and not executed, who may execute it.
	ExecutedBy string
	ExecutedAt Time
	Next       string
	// Focus: the status answers the person's own decision, and takes
	// the focus from the button that made it.
	Focus     bool
	Refusal   *Step  // a refused resume's entry
	Attempted *Diff  // for a refused stale resume: approved against attempted
	Changed   bool   // the status changed since the page was loaded
	Notice    string // why the person sees this (a stale form, a decision made elsewhere)
	// Clock says when the rule's deadline or grant runs out ("" when none
	// runs), and Late whether it has; Others who else may still vote,
	// while the votes are short.
	Clock, Others string
	Late          bool
	// Unmeetable says why the people the server knows cannot meet what
	// the request still needs (engine.Review.Unmeetable), "" when they can.
	Unmeetable string
	Request    *Sibling // for the update loop's out-of-band refresh
}

// Decision is a person's recorded decision (or the server's: an expiry).
type Decision struct {
	// Verb is what was decided: approved, rejected, dismissed, withdrawn,
	// changes-requested or expired; Kind how it is marked.
	Verb, Kind  string
	Who         string
	At          Time
	Reason      string
	ReceiptHref string
	// Withdrawn says the approval no longer counts.
	Withdrawn bool
}

// Actions are what the signed-in person may do with the request now, as
// the engine allows, and what the form carries.
type Actions struct {
	engine.Actions
	Reason string // a reason typed before a confirmation
	Notice string // why the form was answered this way (a stale form)
	// Passkeys are the person's passkeys that may sign a vote, when the
	// rule asks for one (Actions.Passkey).
	Passkeys []PasskeyRow
}

// Confirm asks the person to confirm a decision, repeating what it is
// about.
type Confirm struct {
	Tool     string
	Decision string // "approve", "reject", "dismiss", "withdraw", "request-changes" or "execute"
	Verb     string // "Approve", "Reject", "Dismiss", "Withdraw your approval of", "Send back", "Execute"
	Summary  Summary
	Reason   string
	// What a rejection does besides: the steps it compensates, newest
	// first, the irreversible ones that stay done, and the requests it
	// drops. Keeps is, for a dismissal, the request that stands.
	Undo, StaysDone []Step
	Dropped         []Sibling
	Keeps           int64
	// Ballot is, for a vote the rule counts only signed with a passkey,
	// what the passkey signs; confirming runs the ceremony.
	Ballot *Ballot
}

// Step is one journal entry as the request page and timeline show it.
type Step struct {
	Seq    int64
	Tool   string
	Phase  engine.Phase
	Input  []payload.Segment
	Detail []payload.Segment // the payload
	At     Time
	Href   string // to the entry in the timeline
}

// Sibling is another request of the same saga.
type Sibling struct {
	Seq     int64
	Tool    string
	Href    string
	Summary Summary
}
