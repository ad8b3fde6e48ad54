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
	// after it.
	Chain      *engine.Verification
	Checked    *Time
	Since      int64
	AuditHref  string
	ExportHref string
}

// TimelinePage is a saga's journal as a person reads it, a page of
// entries at a time.
type TimelinePage struct {
	Chrome
	Saga         engine.Saga
	Verification engine.Verification
	Entries      []TimelineEntry
	Total        int
	Earlier      string // URL of the entries before, "" at the start
	Later        string // URL of the entries after, "" at the end
	ExportHref   string
	AuditHref    string
	Pending      []Sibling
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
}

// InDoubtPage lists calls whose outcome the journal does not know.
type InDoubtPage struct {
	Chrome
	After string // how long a call must stand still to be listed
	Calls []InDoubtCall
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
