// Package evidence is the server's evidence and its checks, which anyone
// runs without the server: the hash chain of a saga's journal, the
// payload lines the engine writes into it, the texts the server signs
// (receipts, passkey ballots, export heads, the notes of its own sagas'
// entries) and their one grammar, the requests a journal records and
// their votes under the approval policy each pinned, the passkeys and
// sign-ins that vouch for the voters, exports with their proofs of
// inclusion in the global log, and the log's signed checkpoints.
//
// Every function is pure: it reads what it is given and nothing else (no
// network, no database, no clock). The engine, the global log
// (internal/tlog), the offline commands of cmd/web (sagacity verify,
// verify-receipt, verify-log) and the Go client all check evidence with
// it, so the server and an auditor holding an export cannot disagree.
// Evidence that does not hold is an *Error, whose Msg is safe to show.
package evidence
