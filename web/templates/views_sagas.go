package templates

import (
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/payload"
)

// SagasPage lists sagas with filters.
type SagasPage struct {
	Chrome
	Filter   SagaFilter
	Statuses []engine.Status
	Items    []SagaRow
	Total    int
	Next     string // the next page's URL, "" on the last
	Paged    bool
}

// SagaFilter is the saga list's filter form, as submitted.
type SagaFilter struct {
	Status, ID, Tool, Initiator string
	InDoubt                     bool
}

// SagaRow is one saga in a list.
type SagaRow struct {
	ID, Href  string
	Status    engine.Status
	Initiator string
	Reason    string
	Entries   int64
	Created   Time
	Updated   Time
	// Chain is what verifying the journal said, on the audit list: the
	// newest verification kept, Checked when it was made (nil when the
	// saga was never verified) and Since how many entries the saga took
	// after it; AuditHref its verification, where the audit list's rows
	// lead.
	Chain     *engine.Verification
	Checked   *Time
	Since     int64
	AuditHref string
}

// TimelinePage is a saga's journal as a person reads it, a page of
// entries at a time, and what the person may do with the saga.
type TimelinePage struct {
	Chrome
	Saga         engine.Saga
	Verification engine.Verification
	// Items are the page's entries, a call's INTENT and its answer
	// folded into one unless Filter.Unfold.
	Items      []TimelineItem
	Total      int    // entries in the journal
	Shown      string // which of them the page shows, in words
	First      string // URL of the first page, "" on it
	Earlier    string // URL of the entries before, "" at the start
	Later      string // URL of the entries after, "" at the end
	Filter     TimelineFilter
	Phases     []engine.Phase
	ExportHref string
	AuditHref  string
	Pending    []Sibling
	Actions    SagaActions
}

// TimelineFilter is the timeline's filter form, as submitted.
type TimelineFilter struct {
	Phase  string // only the items with an entry of this phase; "" for all
	Unfold bool   // each entry on its own, a call's answer apart from its INTENT
}

// TimelineItem is one row of a timeline: an entry, or a call folded into
// one line, its INTENT and the entry its answer was journaled as.
type TimelineItem struct {
	Entries []TimelineEntry
	Folded  bool
	// Open shows a folded call's entries: it holds the entry a link
	// pointed at, where verification stops, or a call in doubt.
	Open bool
}

// SagaActions is what the person may do with the saga as a whole, as the
// engine says: abort it, or record a step whose undo failed as undone by
// hand.
type SagaActions struct {
	Abort bool
	Why   string // why they may not abort a saga that takes work
	// Failed are the steps whose undo failed.
	Failed  []FailedUndo
	Confirm *AbortConfirm // what aborting does, asked before it is done
	Notice  string        // what became of a form that went stale
}

// AbortConfirm asks whether to abort the saga, saying what that does:
// which steps are undone, newest first, which irreversible ones stay
// done, and which requests are dropped.
type AbortConfirm struct {
	Reason          string
	Undo, StaysDone []Step
	Dropped         []Sibling
}

// FailedUndo is a step whose undo failed, for a person to undo by hand
// and record.
type FailedUndo struct {
	Seq   int64 // the call's INTENT
	Tool  string
	Input []payload.Segment
	Error []payload.Segment // what the failed undo answered
	Href  string            // the failed undo's entry
	Why   string            // why the person may not record it; "" when they may
}

// ReceiptView is a decision's signed receipt, decoded.
type ReceiptView struct {
	Note    []payload.Segment // the signed note: its text and signature
	Problem string            // why it does not hold; "" when it does
	Href    string            // downloads it
	File    string            // what it downloads as
}

// TimelineEntry is one journal entry with its chain link.
type TimelineEntry struct {
	ID        string // the anchor, e<seq>
	Seq       int64
	Tool      string
	Phase     engine.Phase
	Input     []payload.Segment
	Payload   []payload.Segment
	Actor     string // who asked for, decided or resolved it
	At        Time
	Hash      string
	Prev      string
	Target    bool   // the entry the link pointed at
	Broken    string // why verification stops here, if it does
	Request   string // the request page, for an AWAITING_APPROVAL entry
	Attempted *Diff  // for a refused stale resume: approved against attempted
	// Orphan is set on the INTENT of a call in doubt: no entry records
	// its outcome (Undo: its undo's).
	Orphan, Undo bool
	DoubtHref    string // the in-doubt page, where a person records what happened
	// Call is the INTENT of the call the entry answers, resolves or
	// undoes (0 for none), CallHref that entry.
	Call     int64
	CallHref string
	// Receipt is a decision's receipt; Payload then holds the decision's
	// other lines.
	Receipt *ReceiptView
}

// AuditPage lists sagas with the state of their chains, and the job that
// verifies them all.
type AuditPage struct {
	Chrome
	Items []SagaRow
	Next  string
	Paged bool
	Job   Job
	Log   LogCard
}

// LogCard is the global log: the newest checkpoint outside the database,
// whether the database still matches it, and how to check both offline.
type LogCard struct {
	Error      string // why the log's state could not be read
	Size       int64  // leaves in the database's log
	Checkpoint int64  // the newest checkpoint's size; 0 when none yet
	Root       string // its root, hex
	SignedAt   Time
	Checked    *Time // when the database was last compared with it
	FullCheck  *Time // … from every journal entry
	Halted     string
	Key        string // the public key
	Href       string // downloads the checkpoint
	File       string // what it downloads as
}

// Job is the verification of every saga, running or done.
type Job struct {
	Running  bool
	Started  Time
	Done     int
	Total    int
	Broken   []SagaRow // sagas whose chain does not verify
	Finished *Time
	Error    string
	CanStart bool
}

// VerifyPage is one saga's verification, in words.
type VerifyPage struct {
	Chrome
	Saga           engine.Saga
	Verification   engine.Verification
	BrokenHref     string // the broken entry in the timeline
	ExportHref     string // with proofs against Checkpoint when there is one
	FileName       string // what the export downloads as
	TimelineHref   string
	Decisions      []DecisionRow
	Key            string // the public key
	Checkpoint     int64  // the newest checkpoint's size; 0 when none yet
	CheckpointHref string
	CheckpointFile string // what it downloads as
	// Dev is set when a decision was made in dev mode: verify refuses it
	// unless told -allow-dev. Unproved counts the entries newer than the
	// checkpoint, which verify refuses unless told -allow-unproved.
	Dev      bool
	Unproved int
}

// VerifyFlags are the flags the offline check of v needs beyond the key
// and the checkpoint.
func (v VerifyPage) VerifyFlags() string {
	var f string
	if v.Dev {
		f += " -allow-dev"
	}
	if v.Unproved > 0 && v.Checkpoint > 0 {
		f += " -allow-unproved"
	}
	return f
}

// DecisionRow is a person's decision and its receipt.
type DecisionRow struct {
	Seq       int64
	Decision  engine.Decided
	Decider   string
	Problem   string // why the receipt does not hold; "" when it does
	EntryHref string // the decision in the timeline
	Href      string // downloads the receipt
	File      string // what it downloads as
	// PayloadHref downloads the exact bytes decided on, the PAYLOAD_FILE
	// verify-receipt takes; PayloadFile is what they download as.
	PayloadHref, PayloadFile string
}

// InDoubtPage lists calls whose outcome the journal does not know.
type InDoubtPage struct {
	Chrome
	After string // how long a call must stand still to be listed
	Calls []InDoubtCall
	// Failed counts the sagas whose compensation failed, which wait for
	// a person too; FailedHref lists them.
	Failed     int
	FailedHref string
}

// InDoubtCall is one call in doubt with its evidence and what the person
// may record.
type InDoubtCall struct {
	SagaID, SagaHref string
	Seq              int64
	Tool             string
	Input            []payload.Segment
	Key              string // the Idempotency-Key its tool received
	Undo             bool   // the undo is in doubt, not the call
	Requester        string
	Started, Updated Time
	EntryHref        string
	Why              string // why the person may not resolve it; "" when they may
	// Later are the calls the saga made after it, oldest first.
	Later []LaterCall
}

// LaterCall is a call a saga made after one in doubt.
type LaterCall struct {
	Seq   int64
	Tool  string
	Gated bool // an AWAITING_APPROVAL request, not an INTENT
	Same  bool // the same tool with the same bytes: perhaps a retry
	Href  string
}
