package mcpgw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sagacity-go/sagacity/internal/api"
	"github.com/sagacity-go/sagacity/internal/edge"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// The gateway's own tools, beside the engine's.
const (
	statusTool = engine.ReservedPrefix + "status"
	resumeTool = engine.ReservedPrefix + "resume"
)

// SagaHeader names the saga an HTTP request's calls belong to.
const SagaHeader = "Sagacity-Saga-Id"

// The keys in a call's _meta that name its saga and hold the agent's
// idempotency key for it.
const (
	sagaMeta   = "sagacity/saga"
	keyMeta    = "sagacity/idempotency-key"
	reasonMeta = "sagacity/reason" // why the agent asks, shown to reviewers
)

// sagaOf is the saga a call belongs to: named by its _meta or its HTTP
// request's header (named), else the session's own.
func sagaOf(req *mcp.CallToolRequest) (saga string, named bool) {
	if s, ok := req.Params.Meta[sagaMeta].(string); ok && s != "" {
		return s, true
	}
	if req.Extra != nil {
		if s := req.Extra.Header.Get(SagaHeader); s != "" {
			return s, true
		}
	}
	if id := req.Session.ID(); id != "" {
		return "mcp-" + id, false
	}
	return "mcp-" + fmt.Sprintf("%p", req.Session), false
}

// listed is how a tool is listed: its schema, or any object, and what its
// reversibility means for the agent.
func listed(t engine.ToolInfo) *mcp.Tool {
	schema := t.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	desc := strings.TrimSpace(t.Description)
	destructive := t.Reversibility == engine.Irreversible
	switch {
	case destructive:
		desc = strings.TrimSpace(desc + " Cannot be undone: each call waits for a person's approval (the call answers " +
			"AWAITING_APPROVAL; then " + statusTool + " and " + resumeTool + ").")
	case desc == "":
		// Every tool is described (the conformance suite holds it): what
		// the model can rely on of one configured without a description.
		desc = "Journaled, and undone if its saga fails."
	}
	return &mcp.Tool{Name: t.Name, Description: desc, InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive}}
}

// call runs an engine tool.
func (g *Gateway) call(t engine.ToolInfo) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, err := caller(req.Session, req.Extra)
		if err != nil {
			return nil, err
		}
		saga, named := sagaOf(req)
		input := string(req.Params.Arguments)
		if input == "" {
			input = "{}"
		}
		key, ok := req.Params.Meta[keyMeta].(string)
		if _, set := req.Params.Meta[keyMeta]; set && (!ok || key == "") {
			return failed(engine.Errorf(engine.Invalid, "_meta %q must be a string that is not empty", keyMeta))
		}
		reason, ok := req.Params.Meta[reasonMeta].(string)
		if _, set := req.Params.Meta[reasonMeta]; set && !ok {
			return failed(engine.Errorf(engine.Invalid, "_meta %q must be a string", reasonMeta))
		}
		if !named {
			g.joined(req.Session, p, saga)
		}
		ask := func() (engine.CallResult, error) {
			return g.engine.CallOnce(ctx, p, saga, engine.Ask{Tool: t.Name, Input: input, Key: key, Reason: reason})
		}
		if g.hold <= 0 || tasked(req.Extra) {
			return called(ask())
		}
		// The call may be held: the deep stack of its first work goes
		// with a goroutine of its own, and the one that waits keeps its
		// small stack (engine.Apart).
		r, err := engine.Apart(ask)
		if err == nil && r.Outcome == engine.OutcomeAwaitingApproval {
			return g.held(ctx, req, p, r)
		}
		return called(r, err)
	}
}

// called answers a call as the engine answered it: the tool's result;
// the gate's text, saying how to go on; or the call's failure or
// refusal, as a tool error.
func called(r engine.CallResult, err error) (*mcp.CallToolResult, error) {
	if err != nil {
		return failed(err)
	}
	out, _ := api.CallOf(r)
	switch r.Outcome {
	case engine.OutcomeExecuted:
		return result(r.Result, out, false), nil
	case engine.OutcomeAwaitingApproval:
		return result(fmt.Sprintf("%s Its saga is %s, its seq %d: ask %s, and once it is approved call %s with that seq.",
			r.Message, r.SagaID, r.Seq, statusTool, resumeTool), out, false), nil
	}
	return result(fmt.Sprintf("%s: %s", r.Outcome, r.Error), out, true), nil
}

// result is a tool result: text for the model, the same as structured
// content, and whether it is the tool's failure.
func result(text string, structured any, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: structured, IsError: isError}
}

// actionable is err as the engine's, when it is one the agent can act on
// (invalid input, a refusal, a conflict): not the store being down.
func actionable(err error) (*engine.Error, bool) {
	var e *engine.Error
	ok := errors.As(err, &e) && e.Kind != engine.Internal && e.Kind != engine.Unavailable && e.Kind != engine.Unauthenticated
	return e, ok
}

// errTryLater is the protocol error that answers the store being down,
// or anything else the client cannot act on: its cause goes unsaid.
var errTryLater = errors.New("the server could not take the call; try again later")

// failed answers an engine error: what the agent can act on (invalid
// input, a refusal, a conflict) as a tool error the model reads; the
// store being down as a protocol error the client may retry.
func failed(err error) (*mcp.CallToolResult, error) {
	e, ok := actionable(err)
	if !ok {
		return nil, errTryLater
	}
	return result(e.Msg, edge.Refusal(err, e.Msg), true), nil
}

// seqArg reads a tool's {"seq": N} arguments; 0 when absent.
func seqArg(raw json.RawMessage) (int64, error) {
	var a struct {
		Seq int64 `json:"seq"`
	}
	if len(raw) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil || a.Seq < 0 {
			return 0, errors.New(`arguments must be {"seq": a positive integer}`)
		}
	}
	return a.Seq, nil
}

// stateOf reads a saga and what became of its requests (only the one at
// seq, unless 0), as p.
func (g *Gateway) stateOf(ctx context.Context, p engine.Principal, saga string, seq int64) (wire.SagaRequests, error) {
	sg, reqs, err := g.engine.Requests(ctx, p, saga)
	if err == nil && seq != 0 {
		reqs, err = only(reqs, saga, seq)
	}
	if err != nil {
		return wire.SagaRequests{}, err
	}
	return api.SagaRequestsOf(sg, reqs), nil
}

// request reads the request at seq of saga as p: what became of it and
// where its votes stand (Requests), without the verification, diffs and
// history a reviewer's Review reads, so that an agent polling it costs
// the database the same however many requests are open.
func (g *Gateway) request(ctx context.Context, p engine.Principal, saga string, seq int64) (engine.Review, error) {
	_, reqs, err := g.engine.Requests(ctx, p, saga)
	if err == nil {
		reqs, err = only(reqs, saga, seq)
	}
	if err != nil {
		return engine.Review{}, err
	}
	return reqs[0], nil
}

// only keeps the request at seq of saga's requests; NotFound without it.
func only(reqs []engine.Review, saga string, seq int64) ([]engine.Review, error) {
	reqs = slices.DeleteFunc(reqs, func(rv engine.Review) bool { return rv.Gated.Seq != seq })
	if len(reqs) == 0 {
		return nil, engine.Errorf(engine.NotFound, "saga %s has no request at seq=%d", saga, seq)
	}
	return reqs, nil
}

// status is sagacity_status.
func (g *Gateway) status(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, err := caller(req.Session, req.Extra)
	if err != nil {
		return nil, err
	}
	seq, err := seqArg(req.Params.Arguments)
	if err != nil {
		return failed(engine.Errorf(engine.Invalid, "%s", err.Error()))
	}
	saga, _ := sagaOf(req)
	st, err := g.stateOf(ctx, p, saga, seq)
	if err != nil {
		return failed(err)
	}
	b, _ := json.Marshal(st)
	// What a reviewer sent back is said first, in the words the model
	// acts on.
	var text strings.Builder
	for _, r := range st.Requests {
		if r.Message != "" {
			text.WriteString(r.Message + "\n")
		}
	}
	text.Write(b)
	return result(text.String(), st, false), nil
}

// resume is sagacity_resume: it executes an approved request with the
// bytes the person approved, which are the ones its journal entry holds.
func (g *Gateway) resume(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, err := caller(req.Session, req.Extra)
	if err != nil {
		return nil, err
	}
	seq, err := seqArg(req.Params.Arguments)
	if err == nil && seq == 0 {
		err = errors.New(`arguments must be {"seq": a positive integer}`)
	}
	if err != nil {
		return failed(engine.Errorf(engine.Invalid, "%s", err.Error()))
	}
	// The agent executes the bytes its request journaled, which are the
	// ones a person approved.
	saga, _ := sagaOf(req)
	return g.executed(g.engine.Execute(ctx, p, saga, seq))
}

// answer is what an agent waiting on a request (a held call, a task) is
// answered once it is no longer one to wait on: approved, it is the
// agent's own call going on, so it executes now, as the agent (Execute,
// which runs it once however many ask); otherwise what the call answers
// now (Gated): what its execution came to, or how it was closed (a
// rejection naming who and why).
func (g *Gateway) answer(ctx context.Context, p engine.Principal, rv engine.Review) (*mcp.CallToolResult, error) {
	if rv.State == engine.StateApproved {
		return g.executed(g.engine.Execute(ctx, p, rv.Gated.SagaID, rv.Gated.Seq))
	}
	return called(g.engine.Gated(ctx, p, rv.Gated.SagaID, rv.Gated.Seq))
}

// executed answers an execution of a request, as Execute returned it:
// the tool's result, or what became of the request as a tool error.
func (g *Gateway) executed(r engine.ResumeResult, err error) (*mcp.CallToolResult, error) {
	if err != nil {
		return failed(err)
	}
	out, _ := api.ResumeOf(r)
	if out.Outcome != wire.Executed {
		return result(fmt.Sprintf("%s: %s", out.Outcome, r.Reason), out, true), nil
	}
	return result(r.Result, out, false), nil
}
