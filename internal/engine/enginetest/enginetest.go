package enginetest

import (
	"slices"
	"testing"

	"github.com/sagacity-go/sagacity/internal/store/storetest"
)

// Run runs the scenarios, in parallel, or only those named; a name no
// scenario has fails the test. newHarness must return a fresh, empty
// database each time it is called.
func Run(t *testing.T, newHarness func(t *testing.T) storetest.Harness, only ...string) {
	for _, name := range only {
		if !slices.ContainsFunc(scenarios, func(s scenario) bool { return s.name == name }) {
			t.Errorf("Run(%q): no scenario has that name", name)
		}
	}
	for _, s := range scenarios {
		if len(only) > 0 && !slices.Contains(only, s.name) {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.fn(t, newHarness)
		})
	}
}

// scenario is one scenario by name: most run on an env of their own
// (withEnv), the others make their envs or databases from the harness.
type scenario struct {
	name string
	fn   func(*testing.T, func(*testing.T) storetest.Harness)
}

// withEnv runs f on an env of its own.
func withEnv(f func(*testing.T, *env)) func(*testing.T, func(*testing.T) storetest.Harness) {
	return func(t *testing.T, nh func(*testing.T) storetest.Harness) { f(t, newEnv(t, nh)) }
}

var scenarios = []scenario{
	{"Journal", withEnv(testJournal)},
	{"GateApproveResume", withEnv(testGateApproveResume)},
	{"RefusedResume", testRefusedResume},
	{"EarlyResume", withEnv(testEarlyResume)},
	{"Await", withEnv(testAwait)},
	{"OnApproval", withEnv(testOnApproval)},
	{"WaitTimer", withEnv(testWaitTimer)},
	{"BreakGlass", withEnv(testBreakGlass)},
	{"Cancel", withEnv(testCancel)},
	{"Reject", withEnv(testReject)},
	{"FinishedSaga", withEnv(testFinishedSaga)},
	{"Compensation", withEnv(testCompensation)},
	{"CompensationFailure", withEnv(testCompensationFailure)},
	{"GatedThenFailed", withEnv(testGatedThenFailed)},
	{"ResumedToolFails", withEnv(testResumedToolFails)},
	{"Panic", withEnv(testPanic)},
	{"Authorization", withEnv(testAuthorization)},
	{"BadInput", withEnv(testBadInput)},
	{"AbortAndEnd", withEnv(testAbortAndEnd)},
	{"SagaFunc", withEnv(testSagaFunc)},
	{"ConcurrentAppends", withEnv(testConcurrentAppends)},
	{"ConcurrentResumes", testConcurrentResumes},
	{"StalePromises", withEnv(testStalePromises)},
	{"Tampering", withEnv(testTampering)},
	{"Lifecycle", withEnv(testLifecycle)},
	{"VerifyWhileWriting", withEnv(testVerifyWhileWriting)},
	{"Pending", withEnv(testPending)},
	{"Review", withEnv(testReview)},
	{"Resolve", withEnv(testResolve)},
	{"Receipts", withEnv(testReceipts)},
	{"Log", withEnv(testLog)},
	{"LogTamper", testLogTamper},
	{"LogRollback", testLogRollback},
	{"LogHalts", testLogHalts},
	{"SagaRewritten", testSagaRewritten},
	{"Restart", testRestart},
	{"Listing", withEnv(testListing)},
	{"InDoubt", testInDoubt},
	{"IdempotencyKeys", withEnv(testIdempotencyKeys)},
	{"Answers", withEnv(testAnswers)},
	{"CutOff", testCutOff},
	{"LiveRunner", testLiveRunner},
	{"ReadAsItEnds", withEnv(testReadAsItEnds)},
	{"Dismiss", withEnv(testDismiss)},
	{"ApprovalRules", withEnv(testApprovalRules)},
	{"FailsClosed", withEnv(testFailsClosed)},
	{"Votes", withEnv(testVotes)},
	{"Clocks", withEnv(testClocks)},
	{"Lapses", withEnv(testLapses)},
	{"DevClocks", withEnv(testDevClocks)},
	{"EditedRows", withEnv(testEditedRows)},
	{"PolicyChange", withEnv(testPolicyChange)},
	{"PolicyChangeGated", withEnv(testPolicyChangeGated)},
	{"VoteRace", testVoteRace},
	{"Thresholds", withEnv(testThresholds)},
	{"TeamHealth", withEnv(testTeamHealth)},
	{"Context", withEnv(testContext)},
	{"ThresholdRace", testThresholdRace},
	{"Passkeys", withEnv(testPasskeys)},
	{"Delegation", withEnv(testDelegation)},
	{"ForgedSessions", withEnv(testForgedSessions)},
	{"Outbox", withEnv(testOutbox)},
	{"OutboxClaims", withEnv(testOutboxClaims)},
	{"OutboxForged", withEnv(testOutboxForged)},
	{"VerifyAll", withEnv(testVerifyAll)},
	{"UndoneByHand", withEnv(testUndoneByHand)},
	{"SagaActions", withEnv(testSagaActions)},
	{"GroupCommit", withEnv(testGroupCommit)},
}
