package engine

import (
	"errors"
	"time"

	"github.com/sagacity-go/sagacity/evidence"
	"golang.org/x/mod/sumdb/note"
)

// The evidence the engine writes, and its checks, are package evidence's:
// the hash chain, the payload lines, the signed texts, the requests'
// lifecycle and votes, passkeys, sign-ins and exports. The engine, and
// every shell (hundreds of call sites), name its types and constants by
// the names here. Of its functions, those the engine calls at many
// sites, whose errors a shell reads, or that the stores' tests call
// through the engine keep a name here too, returning the engine's errors
// (Invalid, with the evidence's message); tally, gateRefusal, cleanLine
// and validName keep the names calls.go calls them by. Everything else
// calls package evidence.

// The journal's vocabulary.
type (
	Entry         = evidence.Entry
	Phase         = evidence.Phase
	Key           = evidence.Key
	Line          = evidence.Line
	Lines         = evidence.Lines
	Role          = evidence.Role
	AuthMethod    = evidence.AuthMethod
	Verification  = evidence.Verification
	Decided       = evidence.Decided
	Closing       = evidence.Closing
	Vote          = evidence.Vote
	Life          = evidence.Life
	Lifecycle     = evidence.Lifecycle
	Tally         = evidence.Tally
	Ruling        = evidence.Ruling
	Proofs        = evidence.Proofs
	Attached      = evidence.Attached
	Checkpoint    = evidence.Checkpoint
	Head          = evidence.Head
	Receipt       = evidence.Receipt
	PasskeyBallot = evidence.PasskeyBallot
	PasskeyProof  = evidence.PasskeyProof
	Passkey       = evidence.Passkey
	Passkeys      = evidence.Passkeys
	Delegation    = evidence.Delegation
	Delegations   = evidence.Delegations
	Assertion     = evidence.Assertion
	// CheckAssertion checks a passkey's assertion (passkey.Check).
	CheckAssertion  = evidence.CheckAssertion
	CheckIDToken    = evidence.CheckIDToken
	SignIns         = evidence.SignIns
	Identity        = evidence.Identity
	DecisionReceipt = evidence.DecisionReceipt
	PolicyDocument  = evidence.PolicyDocument
	Keyring         = evidence.Keyring
	Policies        = evidence.Policies
)

// The approval policy's.
type (
	PolicySpec = evidence.PolicySpec
	RuleSpec   = evidence.RuleSpec
	StepSpec   = evidence.StepSpec
	// BreakGlassSpec and BreakGlass are the policy's break-glass.
	BreakGlassSpec = evidence.BreakGlassSpec
	BreakGlass     = evidence.BreakGlass
	Duration       = evidence.Duration
	Approvals      = evidence.Approvals
	Rule           = evidence.Rule
	Step           = evidence.Step
	Matched        = evidence.Matched
	// Context is what a request's conditions saw of who asked and when.
	Context = evidence.Context
	Who     = evidence.Who
	// Requirement is one requirement of a rule's thresholds, and
	// Standing where it stands.
	Requirement = evidence.Requirement
	Standing    = evidence.Standing
)

// Phases, tools and sagas.
const (
	PhaseIntent             = evidence.PhaseIntent
	PhaseExecuted           = evidence.PhaseExecuted
	PhaseFailed             = evidence.PhaseFailed
	PhaseCompensated        = evidence.PhaseCompensated
	PhaseCompensationFailed = evidence.PhaseCompensationFailed
	PhaseAwaitingApproval   = evidence.PhaseAwaitingApproval
	PhaseApproved           = evidence.PhaseApproved
	PhaseRejected           = evidence.PhaseRejected

	GateTool       = evidence.GateTool
	ZeroHash       = evidence.ZeroHash
	TimeLayout     = evidence.TimeLayout
	EncodedPrefix  = evidence.EncodedPrefix
	MaxIDLen       = evidence.MaxIDLen
	MaxReasonLen   = evidence.MaxReasonLen
	MaxNDJSONLine  = evidence.MaxNDJSONLine
	PolicySaga     = evidence.PolicySaga
	PolicyTool     = evidence.PolicyTool
	PasskeySaga    = evidence.PasskeySaga
	DelegationSaga = evidence.DelegationSaga
	// Delegated and DelegationRevoked are DelegationSaga's tools.
	Delegated         = evidence.Delegated
	DelegationRevoked = evidence.DelegationRevoked
	MaxDelegation     = evidence.MaxDelegation
	PasskeyEnrolled   = evidence.PasskeyEnrolled
	PasskeyRemoved    = evidence.PasskeyRemoved
	PasskeyUsed       = evidence.PasskeyUsed
	SignInSaga        = evidence.SignInSaga
	SignedInTool      = evidence.SignedInTool
	ProviderKeyTool   = evidence.ProviderKeyTool
	NotificationSaga  = evidence.NotificationSaga
	DeliveryRetried   = evidence.DeliveryRetried
	EndpointEnabled   = evidence.EndpointEnabled

	EnrolWithin         = evidence.EnrolWithin
	MaxSignInSkew       = evidence.MaxSignInSkew
	MaxSession          = evidence.MaxSession
	SignInByAccessToken = evidence.SignInByAccessToken

	MinWindow    = evidence.MinWindow
	MinDevWindow = evidence.MinDevWindow
)

// Payload keys.
const (
	KeyRequester   = evidence.KeyRequester
	KeyAuth        = evidence.KeyAuth
	KeyClient      = evidence.KeyClient
	KeyIdempotency = evidence.KeyIdempotency
	KeyRule        = evidence.KeyRule
	KeyPolicy      = evidence.KeyPolicy
	KeyContext     = evidence.KeyContext
	KeyResumes     = evidence.KeyResumes
	KeyExecutedBy  = evidence.KeyExecutedBy
	KeyApprover    = evidence.KeyApprover
	KeyMeets       = evidence.KeyMeets
	KeyOnBehalfOf  = evidence.KeyOnBehalfOf
	KeyDismissedBy = evidence.KeyDismissedBy
	KeyWithdrawnBy = evidence.KeyWithdrawnBy
	KeyChangesBy   = evidence.KeyChangesBy
	KeyCancelledBy = evidence.KeyCancelledBy
	KeyBrokenBy    = evidence.KeyBrokenBy
	KeyRatifiedBy  = evidence.KeyRatifiedBy
	KeyExpired     = evidence.KeyExpired
	KeyPasskey     = evidence.KeyPasskey
	KeySignIn      = evidence.KeySignIn
	KeyRetiredBy   = evidence.KeyRetiredBy
	KeyResolvedBy  = evidence.KeyResolvedBy
	KeyReason      = evidence.KeyReason
	KeyReceipt     = evidence.KeyReceipt
	KeyDropped     = evidence.KeyDropped
	KeyAttempted   = evidence.KeyAttempted
	KeyResult      = evidence.KeyResult
)

// Roles, sign-ins and decisions.
const (
	RoleAgent    = evidence.RoleAgent
	RoleApprover = evidence.RoleApprover
	RoleAuditor  = evidence.RoleAuditor

	AuthOIDC   = evidence.AuthOIDC
	AuthToken  = evidence.AuthToken
	AuthDev    = evidence.AuthDev
	AuthServer = evidence.AuthServer

	DecidedApproved    = evidence.DecidedApproved
	DecidedRejected    = evidence.DecidedRejected
	DecidedHappened    = evidence.DecidedHappened
	DecidedNotHappened = evidence.DecidedNotHappened
	DecidedUndone      = evidence.DecidedUndone
	DecidedNotUndone   = evidence.DecidedNotUndone
	DecidedDismissed   = evidence.DecidedDismissed
	DecidedWithdrawn   = evidence.DecidedWithdrawn
	DecidedChanges     = evidence.DecidedChanges
	DecidedCancelled   = evidence.DecidedCancelled
	DecidedExpired     = evidence.DecidedExpired
	DecidedBreakGlass  = evidence.DecidedBreakGlass
	DecidedRatified    = evidence.DecidedRatified
	ServerDecider      = evidence.ServerDecider
)

// How requests close, and the gate refuses.
const (
	ClosedResumed   = evidence.ClosedResumed
	ClosedRejected  = evidence.ClosedRejected
	ClosedRefused   = evidence.ClosedRefused
	ClosedDropped   = evidence.ClosedDropped
	ClosedDismissed = evidence.ClosedDismissed
	ClosedChanges   = evidence.ClosedChanges
	ClosedExpired   = evidence.ClosedExpired
	ClosedCancelled = evidence.ClosedCancelled

	RefusedNoRule    = evidence.RefusedNoRule
	RefusedCondition = evidence.RefusedCondition
)

// The approval policy's bounds and values.
const (
	PasskeyRequired   = evidence.PasskeyRequired
	ReasonRequired    = evidence.ReasonRequired
	ExecuteOnApproval = evidence.ExecuteOnApproval
	ExecutedByServer  = evidence.ExecutedByServer
	OnErrorSkip       = evidence.OnErrorSkip
)

// Lists, and the policy without configuration.
var (
	Phases        = evidence.Phases
	Roles         = evidence.Roles
	Decideds      = evidence.Decideds
	DefaultPolicy = evidence.DefaultPolicy
)

// MeetsText is evidence.MeetsText.
func MeetsText(meets []int) string { return evidence.MeetsText(meets) }

// PayloadHash is evidence.PayloadHash.
func PayloadHash(input string) string { return evidence.PayloadHash(input) }

// Hash is evidence.Hash.
func Hash(prev string, e Entry) string { return evidence.Hash(prev, e) }

// Truncate is evidence.Truncate.
func Truncate(t time.Time) time.Time { return evidence.Truncate(t) }

// EncodeText is evidence.EncodeText.
func EncodeText(s string) string { return evidence.EncodeText(s) }

// DecodeText is evidence.DecodeText; Invalid for an encoded text whose
// base64 does not decode.
func DecodeText(s string) (string, error) { return asInvalid(evidence.DecodeText(s)) }

// CompilePolicy is evidence.CompilePolicy.
func CompilePolicy(spec PolicySpec) (*Approvals, error) { return evidence.CompilePolicy(spec) }

// CompileDevPolicy is evidence.CompileDevPolicy.
func CompileDevPolicy(spec PolicySpec) (*Approvals, error) { return evidence.CompileDevPolicy(spec) }

// RequireMinWindow is evidence.RequireMinWindow.
func RequireMinWindow(a *Approvals) error { return evidence.RequireMinWindow(a) }

// ParsePolicy is evidence.ParsePolicy; Invalid when the text is no
// canonical approval policy document.
func ParsePolicy(text string) (*Approvals, error) { return asInvalid(evidence.ParsePolicy(text)) }

// ReceiptOf is evidence.ReceiptOf.
func ReceiptOf(e Entry) string { return evidence.ReceiptOf(e) }

// ParseReceipt is evidence.ParseReceipt; Invalid for anything a
// receipt's text is not.
func ParseReceipt(text string) (Receipt, error) { return asInvalid(evidence.ParseReceipt(text)) }

// OpenReceipt is evidence.OpenReceipt; Invalid when the key did not sign
// a receipt.
func OpenReceipt(signed string, v note.Verifier) (Receipt, error) {
	return asInvalid(evidence.OpenReceipt(signed, v))
}

// VerifyJournal is evidence.VerifyJournal.
func VerifyJournal(entries []Entry) Verification { return evidence.VerifyJournal(entries) }

// VerifyReceipts is evidence.VerifyReceipts.
func VerifyReceipts(entries []Entry, v note.Verifier) Verification {
	return evidence.VerifyReceipts(entries, v)
}

// Decisions is evidence.Decisions.
func Decisions(entries []Entry, v note.Verifier) []DecisionReceipt {
	return evidence.Decisions(entries, v)
}

// ReadPasskeys is evidence.ReadPasskeys; Invalid naming the first entry
// that is no passkey entry the key signed.
func ReadPasskeys(entries []Entry, v note.Verifier) (Passkeys, error) {
	return asInvalid(evidence.ReadPasskeys(entries, v))
}

// ReadDelegations is evidence.ReadDelegations; Invalid naming the first
// entry that does not read.
func ReadDelegations(entries []Entry, v note.Verifier) (Delegations, error) {
	return asInvalid(evidence.ReadDelegations(entries, v))
}

// ReadSignIns is evidence.ReadSignIns; Invalid naming the first entry
// that is no sign-in record the key signed.
func ReadSignIns(entries []Entry, v note.Verifier, check CheckIDToken, trusted map[string][]byte) (SignIns, error) {
	return asInvalid(evidence.ReadSignIns(entries, v, check, trusted))
}

// tally is evidence.Count.
func tally(gated Entry, l *Life, r Rule) Tally { return evidence.Count(gated, l, r) }

// gateRefusal is evidence.GateRefusal.
func gateRefusal(refusal Entry) Matched { return evidence.GateRefusal(refusal) }

// cleanLine is evidence.CleanLine.
func cleanLine(s string) string { return evidence.CleanLine(s) }

// evidential is err, of what the engine hands evidence's checks to read
// (a policy, the passkeys), as evidence that does not hold: its message
// for people (msgOf), which a verification shows, and never its cause.
func evidential(err error) error {
	if err == nil {
		return nil
	}
	return &evidence.Error{Msg: msgOf(err), Err: err}
}

// asInvalid returns v, and err as invalid makes it: what the engine adds
// to an evidence function that reads text or entries.
func asInvalid[T any](v T, err error) (T, error) { return v, invalid(err) }

// invalid is err, evidence that does not hold (an *evidence.Error), as
// the engine's Invalid error, whose kind and message its callers and the
// shells read; any other error as it is.
func invalid(err error) error {
	if e, ok := errors.AsType[*evidence.Error](err); ok {
		return &Error{Kind: Invalid, Msg: e.Msg, Err: e.Err}
	}
	return err
}
