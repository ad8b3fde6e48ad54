package client

import "github.com/sagacity-go/sagacity/wire"

// The API's shapes are package wire's, declared once for the server and
// every client; these are their names here.
type (
	// Status is where a saga stands.
	Status = wire.Status
	// Outcome is what became of a call or a resume.
	Outcome = wire.Outcome
	// CallResult is what became of a call.
	CallResult = wire.CallResult
	// Saga is the state of one saga.
	Saga = wire.Saga
	// SagaPage is a page of sagas, newest first.
	SagaPage = wire.SagaPage
	// CallInDoubt is a call whose outcome the journal does not know.
	CallInDoubt = wire.CallInDoubt
	// Approval is a gated call waiting for a person's decision.
	Approval = wire.Approval
	// Decision is an approval, rejection or dismissal, as journaled.
	Decision = wire.Decision
	// ResumeResult is what became of a resumed request.
	ResumeResult = wire.ResumeResult
	// Entry is one entry of a saga's journal, as exported.
	Entry = wire.Entry
	// Verification is what verifying a saga found.
	Verification = wire.Verification
	// LogStatus is the state of the global log.
	LogStatus = wire.LogStatus
	// ConsistencyProof proves that the log at size From is a prefix of
	// the log at size To.
	ConsistencyProof = wire.ConsistencyProof
	// Ruling is where a request stands under its approval rule.
	Ruling = wire.Ruling
	// SagaRequests is a saga and what became of each of its requests.
	SagaRequests = wire.SagaRequests
	// RequestState is what became of one request.
	RequestState = wire.RequestState
	// Policies are the approval policies that took effect.
	Policies = wire.Policies
	// PolicyDocument is one approval policy as it took effect.
	PolicyDocument = wire.PolicyDocument
	// Proved is a saga's journal exported with its proofs, and the saga's
	// head as the server exported it: a signed note (sagacity saga head v1)
	// naming the seq and hash of its last entry, so that an export whose tail
	// was cut on the way is caught. Policies are the entries of the server's
	// saga "sagacity:policies" holding the approval policies the saga's
	// requests pin, proved against the same checkpoint: what sagacity verify
	// checks each request's votes against. Passkeys are the entries of its
	// saga "sagacity:passkeys" enrolling and removing the passkeys the saga's
	// votes were signed with, proved the same way: what binds each key to a
	// person. SignIns are the entries of its saga "sagacity:sign-ins" holding
	// the identity provider's signed ID tokens of the sign-ins its decisions
	// and those enrolments name, and the provider keys that verify them.
	// Delegations are the entries of its saga "sagacity:delegations" that
	// record the delegations its delegated votes stand on, and their
	// revocations. The server exports them to those who may read the
	// policies (approvers and auditors), not to agents.
	Proved = wire.Export
)

// A saga's statuses.
const (
	Running            = wire.Running
	AwaitingApproval   = wire.AwaitingApproval
	Compensating       = wire.Compensating
	Completed          = wire.Completed
	Compensated        = wire.Compensated
	CompensationFailed = wire.CompensationFailed
)

// What became of a call or a resume.
const (
	Executed = wire.Executed
	Gated    = wire.Gated
	Failed   = wire.Failed
	Refused  = wire.Refused
	InDoubt  = wire.InDoubt
)
