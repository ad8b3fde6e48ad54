// Package engine owns sagas: tools and their reversibility, the hash-chained
// journal, the approval gate, compensation and verification. It knows
// nothing of HTTP, SQL or HTML; it persists through the Store it is given
// and reads time from an injected clock.
package engine

import (
	"cmp"
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

	"github.com/sagacity-go/sagacity/internal/service"
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
	waits    waits // held waits for decisions (Await)
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
	// configured is the approval policy the server was started with;
	// inForce the one that says which rule applies to each request of an
	// IRREVERSIBLE tool: configured, or while its change waits for
	// approval, the one before (see policychange.go).
	configured *Approvals
	inForce    atomic.Pointer[Approvals]
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
	// people are the people known, as team health reads them.
	people people
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
func WithApprovals(a *Approvals) Option { return func(e *Engine) { e.configured = a } }

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
	if e.configured == nil {
		a, err := CompilePolicy(DefaultPolicy)
		if err != nil {
			return nil, err
		}
		e.configured = a
	}
	e.setPolicy(e.configured)
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
	for label, r := range e.configured.All() {
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
	for _, tool := range e.configured.Tools() {
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

// tries is a service's loop that runs f every d, telling log (the
// engine's when nil) that it failed, in the words of failed, unless the
// service is stopping.
func (e *Engine) tries(log *slog.Logger, d time.Duration, failed string, f func(context.Context) error) service.Loop {
	log = cmp.Or(log, e.log)
	return service.Every(d, func(ctx context.Context) {
		if err := f(ctx); err != nil && ctx.Err() == nil {
			log.Warn(failed, "err", err)
		}
	})
}
