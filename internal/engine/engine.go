// Package engine owns sagas: tools and their reversibility, the hash-chained
// journal, the approval gate, compensation and verification. It knows
// nothing of HTTP, SQL or HTML; it persists through the Store it is given
// and reads time from an injected clock.
package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sagacity-go/sagacity/toolsig"
)

// Executor runs a tool's effect and its undo.
type Executor interface {
	// Execute performs the call and returns its result.
	Execute(ctx context.Context, inv Invocation) (string, error)
	// Compensate undoes an executed call, given the result Execute returned.
	Compensate(ctx context.Context, inv Invocation, result string) error
}

// Invocation identifies one call of a tool. Seq is the call's INTENT
// entry; Request, for a resumed call, the request it executes. Key is
// the idempotency key the tool is handed, unique per call and stable
// across retries.
type Invocation struct {
	SagaID  string
	Seq     int64
	Request int64 // 0 for an agent's call
	Tool    string
	Input   string
}

// Key is the idempotency key of the invocation's phase, the one every way
// of running a tool hands it and the console shows: the saga's id (as
// toolsig.HeaderValue writes it: percent-encoded unless visible ASCII
// without '%'), "/", and the call's seq — the request's, for a resumed
// call, so that a tool's owner finds it from the request a person
// approved — plus "/compensate" for its undo.
func (inv Invocation) Key(phase ToolPhase) string {
	seq := inv.Seq
	if inv.Request > 0 {
		seq = inv.Request
	}
	k := toolsig.HeaderValue(inv.SagaID) + "/" + strconv.FormatInt(seq, 10)
	if phase == ToolCompensate {
		k += "/compensate"
	}
	return k
}

// KeySeq is the seq the invocation's key names.
func (inv Invocation) KeySeq() int64 {
	if inv.Request > 0 {
		return inv.Request
	}
	return inv.Seq
}

// Funcs adapts two functions to an Executor.
type Funcs struct {
	Exec func(ctx context.Context, inv Invocation) (string, error)
	Undo func(ctx context.Context, inv Invocation, result string) error
}

// Execute calls f.Exec.
func (f Funcs) Execute(ctx context.Context, inv Invocation) (string, error) {
	return f.Exec(ctx, inv)
}

// Compensate calls f.Undo, or does nothing when it is nil.
func (f Funcs) Compensate(ctx context.Context, inv Invocation, result string) error {
	if f.Undo == nil {
		return nil
	}
	return f.Undo(ctx, inv, result)
}

// Tool is a named executor with its reversibility. IRREVERSIBLE tools are
// never compensated.
type Tool struct {
	Name          string
	Reversibility Reversibility
	Executor      Executor
	// Description says what the tool does, for the agents that call it.
	Description string
	// InputSchema is the JSON Schema every input must match (see
	// schema.go); none when empty.
	InputSchema json.RawMessage
}

// Engine runs sagas. It is safe for concurrent use, and several engines, in
// one process or many, may share one store.
type Engine struct {
	store    Store
	tools    map[string]Tool
	schemas  map[string]*inputSchema // by tool; absent for a tool without one
	now      func() time.Time
	log      *slog.Logger
	maxInput int
	access   Access
	// retryFor bounds how long an outcome that happened keeps being
	// written while the store is unavailable.
	retryFor time.Duration
	// inDoubtAfter is how long a call must stand still to be resolved.
	inDoubtAfter time.Duration
	// approvals says which rule applies to each request of an
	// IRREVERSIBLE tool.
	approvals *Approvals
	// policies are every policy read so far, the one in force among
	// them: requests are decided by the policy they record.
	policies history
	// signIns are the sign-ins and provider keys this process journaled.
	signIns seen
	// keys sign the receipts of people's decisions, and verify them.
	keys *Keys
	// webauthn enrols passkeys and makes their ceremonies, and
	// checkAssertion checks what they sign; nil without passkeys.
	webauthn       WebAuthn
	checkAssertion CheckAssertion
	// endpoints are where notifications go; none: no event is written.
	endpoints []Endpoint
	// noticed are the keys of the events Notice wrote.
	noticed sync.Map
	// tlog is the global log; nil when there is none (tests).
	tlog Log
	// heads are the sagas as this engine last wrote them (see transact).
	heads heads
	// obs is told what the engine does (see Observer).
	obs Observer
	// runner is the process's runner id, once a Heartbeat registered it.
	runner atomic.Pointer[string]
	// runners is what the process knows of the runners of unsettled
	// calls, its own calls among them.
	runners runners
	// audit is the verification of every saga under way (VerifyAll).
	audit audit
}

// Option configures an Engine.
type Option func(*Engine)

// WithClock sets the clock; the default is time.Now.
func WithClock(now func() time.Time) Option { return func(e *Engine) { e.now = now } }

// WithLogger sets where the engine reports tool panics; the default discards.
func WithLogger(l *slog.Logger) Option { return func(e *Engine) { e.log = l } }

// WithMaxInput caps tool input and resume payload sizes in bytes (default 1 MiB).
func WithMaxInput(n int) Option { return func(e *Engine) { e.maxInput = n } }

// WithAccess sets the configurable rules of who may do what.
func WithAccess(a Access) Option { return func(e *Engine) { e.access = a } }

// WithKeys sets the key that signs receipts; New refuses to make an
// engine without one.
func WithKeys(k *Keys) Option { return func(e *Engine) { e.keys = k } }

// WithApprovals sets the approval policy (default DefaultPolicy).
func WithApprovals(a *Approvals) Option { return func(e *Engine) { e.approvals = a } }

// WithInDoubtAfter sets how long a call must have stood still before a
// person may resolve it (default DefaultInDoubtAfter).
func WithInDoubtAfter(d time.Duration) Option { return func(e *Engine) { e.inDoubtAfter = d } }

// WithOutcomeRetry sets how long the engine keeps trying to journal the
// outcome of a tool that ran while the store is unavailable (default one
// minute). After that the call is left in doubt.
func WithOutcomeRetry(d time.Duration) Option { return func(e *Engine) { e.retryFor = d } }

// New returns an engine over s with the given tools. It returns an Invalid
// error for a tool with a bad name, reversibility or no executor, and for a
// duplicate name.
func New(s Store, tools []Tool, opts ...Option) (*Engine, error) {
	e := &Engine{tools: make(map[string]Tool, len(tools)), schemas: map[string]*inputSchema{}, now: time.Now,
		log: slog.New(slog.DiscardHandler), maxInput: 1 << 20, retryFor: time.Minute,
		inDoubtAfter: DefaultInDoubtAfter, obs: unobserved{}}
	for _, o := range opts {
		o(e)
	}
	e.store = watched{s: s, obs: e.obs}
	if e.keys == nil {
		return nil, Errorf(Invalid, "no signing key: decisions could not be given receipts")
	}
	if e.approvals == nil {
		a, err := CompilePolicy(DefaultPolicy)
		if err != nil {
			return nil, err
		}
		e.approvals = a
	}
	e.policies.put(e.approvals)
	for _, t := range tools {
		if err := validName("tool name", t.Name); err != nil {
			return nil, err
		}
		if t.Name == GateTool || strings.HasPrefix(t.Name, ReservedPrefix) {
			return nil, Errorf(Invalid, "tool name %q is reserved: %s names the journal's decisions and %s* the MCP gateway's own tools; "+
				"rename it (an upstream's tools with its prefix)", t.Name, GateTool, ReservedPrefix)
		}
		if _, dup := e.tools[t.Name]; dup {
			return nil, Errorf(Invalid, "tool %q is declared twice", t.Name)
		}
		r, err := ParseReversibility(string(t.Reversibility))
		if err != nil {
			return nil, err
		}
		if t.Executor == nil {
			return nil, Errorf(Invalid, "tool %q has no executor", t.Name)
		}
		t.Reversibility = r
		e.tools[t.Name] = t
		s, err := compileSchema(t.Name, t.InputSchema)
		if err != nil {
			return nil, err
		}
		if s != nil {
			e.schemas[t.Name] = s
		}
	}
	for label, r := range e.approvals.All() {
		for _, st := range r.Escalate {
			for _, name := range st.Notify {
				if e.endpoint(name) == nil {
					return nil, Errorf(Invalid, "the approval policy's %s, rule %s: escalate names %q, which is no endpoint of notifications:",
						label, r.Name, name)
				}
			}
		}
		if r.PasskeyRequired && e.webauthn == nil {
			return nil, Errorf(Invalid, "the approval policy's %s, rule %s: passkey can never be met here: this server has no "+
				"passkeys, which need the console's public URL, https (or http://localhost)", label, r.Name)
		}
	}
	for _, tool := range e.approvals.Tools() {
		if t, ok := e.tools[tool]; !ok || t.Reversibility != Irreversible {
			return nil, Errorf(Invalid, "the approval policy has rules for %q, which is no IRREVERSIBLE tool: only those are approved", tool)
		}
	}
	return e, nil
}

// ToolInfo describes a registered tool, without the means to run it.
type ToolInfo struct {
	Name          string
	Reversibility Reversibility
	Description   string
	InputSchema   json.RawMessage // none when empty
}

// Tools lists the registered tools by name.
func (e *Engine) Tools() []ToolInfo {
	out := make([]ToolInfo, 0, len(e.tools))
	for _, t := range e.tools {
		out = append(out, ToolInfo{t.Name, t.Reversibility, t.Description, t.InputSchema})
	}
	slices.SortFunc(out, func(a, b ToolInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ReservedPrefix starts the names of the MCP gateway's own tools
// (sagacity_status, sagacity_resume): no configured tool may take one, or
// an agent could not tell the gateway's answer from a tool's.
const ReservedPrefix = "sagacity_"

// validInput checks a tool input: it must fit, and be text that both
// stores keep byte for byte (UTF-8 without NUL), since its exact bytes are
// what gets hashed, approved and executed.
func (e *Engine) validInput(what, s string) error {
	switch {
	case len(s) > e.maxInput:
		return Errorf(Invalid, "%s is larger than %d bytes", what, e.maxInput)
	case !utf8.ValidString(s):
		return Errorf(Invalid, "%s is not valid UTF-8", what)
	case strings.IndexByte(s, 0) >= 0:
		return Errorf(Invalid, "%s contains a NUL character, which cannot be journaled faithfully", what)
	}
	return nil
}

func validReason(s string) error {
	switch {
	case len(s) > MaxReasonLen:
		return Errorf(Invalid, "reason is longer than %d bytes", MaxReasonLen)
	case !utf8.ValidString(s):
		return Errorf(Invalid, "reason is not valid UTF-8")
	case strings.ContainsFunc(s, unicode.IsControl):
		// A newline would let a reason forge the auth= line of a decision.
		return Errorf(Invalid, "reason contains control characters")
	}
	return nil
}

// append adds an entry to s's journal, chained on s's head, and advances
// the head. The caller holds s locked and saves it before committing. The
// payload is journaled as EncodeText keeps it: a tool's result or error
// may hold bytes no store keeps as they are.
func (e *Engine) append(tx Tx, s *Saga, tool string, phase Phase, input, payload string) (Entry, error) {
	return e.appendAt(tx, s, tool, phase, input, payload, e.stamp(s))
}

// stamp is the time of a change to saga s: now, as the journal keeps it,
// but never before the saga's last change. So a saga's entries never go
// back in time, however the clocks of the servers writing it disagree or
// jump, and verification can hold every journal to that.
func (e *Engine) stamp(s *Saga) time.Time {
	return maxTime(Truncate(e.now()), s.UpdatedAt)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// appendAt is append at a time the caller read already with stamp (a
// receipt names it).
func (e *Engine) appendAt(tx Tx, s *Saga, tool string, phase Phase, input, payload string, at time.Time) (Entry, error) {
	en := Entry{SagaID: s.ID, Seq: s.HeadSeq + 1, ToolName: tool, Phase: phase,
		Input: input, Payload: EncodeText(payload), Timestamp: maxTime(at, s.UpdatedAt), Leaf: -1}
	en.Hash = Hash(s.HeadHash, en)
	if err := tx.Append(en); err != nil {
		return Entry{}, err
	}
	s.HeadSeq, s.HeadHash, s.UpdatedAt = en.Seq, en.Hash, en.Timestamp
	return en, nil
}

// update locks saga id, runs fn and saves the saga, in one transaction.
// A missing saga is reported as missing, or as "saga not found" when nil.
func (e *Engine) update(ctx context.Context, id string, missing *Error, fn func(tx Tx, s *Saga) error) (Saga, error) {
	return e.updateCall(ctx, id, 0, "", missing, fn)
}

// updateCall is update that, for seq > 0, runs fn only while the saga's
// call at seq is in state want: when an earlier attempt moved it on (a
// commit whose answer was lost), nothing is done; NotFound when there is
// no such call. The call's state is read with the lock.
func (e *Engine) updateCall(ctx context.Context, id string, seq int64, want CallState, missing *Error, fn func(tx Tx, s *Saga) error) (Saga, error) {
	if missing == nil {
		missing = &Error{Kind: NotFound, Msg: fmt.Sprintf("saga %s not found", id), SagaID: id}
	}
	s, err := e.transact(ctx, id, seq, want, func(tx Tx) (Saga, bool, error) {
		if seq == 0 {
			s, err := tx.LockSaga(id)
			if IsKind(err, NotFound) {
				err = missing
			}
			return s, err == nil, err
		}
		s, state, err := tx.LockSagaCall(id, seq)
		if IsKind(err, NotFound) {
			return s, false, missing
		}
		if err != nil {
			return s, false, err
		}
		work, err := inState(id, seq, state, want)
		return s, work, err
	}, fn)
	return s, at(err, id, 0)
}

// inState reports whether the call at seq, read in state, is still in
// want: false when an earlier attempt moved it on (a commit whose answer
// was lost), NotFound when there is no such call.
func inState(sagaID string, seq int64, state, want CallState) (bool, error) {
	if state == "" {
		return false, &Error{Kind: NotFound, Msg: fmt.Sprintf("call %s/%d not found", sagaID, seq), SagaID: sagaID, Seq: seq}
	}
	return state == want, nil
}

// safely runs f, one run of a tool's phase, turning a panic into an error
// so that a broken tool fails like any other instead of taking the process
// down, and tells how long it took. That is measured on real time, like
// record's backoff: the injected clock only stamps entries.
func (e *Engine) safely(inv Invocation, phase ToolPhase, f func() (string, error)) (res string, err error) {
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			e.log.Error("tool panicked", "saga", inv.SagaID, "seq", inv.Seq, "tool", inv.Tool,
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			res, err = "", fmt.Errorf("tool panicked: %v", r)
		}
		e.obs.ToolRan(inv.Tool, phase, time.Since(start))
	}()
	return f()
}
