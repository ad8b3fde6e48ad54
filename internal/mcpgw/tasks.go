package mcpgw

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// Tasks (the MCP 2025-11-25 tasks utility): a client that asks for a
// task on a call of an IRREVERSIBLE tool (params.task, which the SDK
// does not read: see taskHeader) is answered a task instead of the
// gate's text, and follows the request with tasks/get, tasks/result and
// tasks/cancel. The SDK v1.8.0 knows nothing of tasks, so the gateway
// adds them where the SDK lets a server: a receiving middleware
// (g.tasks) that declares the capability in initialize, marks the gated
// tools in tools/list and answers a task for a gated call; and custom
// methods for tasks/*. A task is its request: its id names the saga and
// seq, so nothing is kept on the server, a task outlives a restart and
// any replica answers it, and every tasks/* is authorised by the engine
// as a read of the saga (Requests) or an execution (Execute).

// The methods of tasks.
const (
	methodTaskGet    = "tasks/get"
	methodTaskResult = "tasks/result"
	methodTaskCancel = "tasks/cancel"
)

// relatedTask is the _meta key of tasks/result naming its task.
const relatedTask = "io.modelcontextprotocol/related-task"

// pollEvery is how often a client is asked to poll a task's status.
const pollEvery = time.Second

// resultWait bounds how long tasks/result holds for a decision; a client
// then asks again.
const resultWait = 10 * time.Minute

// taskID names the task of the request at seq of saga: the saga's id in
// base64url, a dot, the seq.
func taskID(saga string, seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(saga)) + "." + strconv.FormatInt(seq, 10)
}

// taskOf reads a task id: the saga and seq it names, or an Invalid
// error.
func taskOf(id string) (string, int64, error) {
	enc, n, ok := strings.Cut(id, ".")
	saga, err := base64.RawURLEncoding.DecodeString(enc)
	seq, serr := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || serr != nil || len(saga) == 0 || seq < 1 {
		return "", 0, engine.Errorf(engine.Invalid, "%q is no task of this server", id)
	}
	return string(saga), seq, nil
}

// task is a task as MCP has it.
type task struct {
	TaskID        string  `json:"taskId"`
	Status        string  `json:"status"` // working, input_required, completed, failed or cancelled
	StatusMessage string  `json:"statusMessage,omitempty"`
	CreatedAt     string  `json:"createdAt"`
	LastUpdatedAt string  `json:"lastUpdatedAt"`
	TTL           *int64  `json:"ttl"`          // null: kept as long as the journal
	PollInterval  float64 `json:"pollInterval"` // milliseconds
}

// taskOfReview is a request's task: input_required while people vote
// (the message says where the votes stand), working while it executes,
// cancelled once its requester cancelled it, completed once it is no
// longer one to wait on otherwise, whatever became of it (tasks/result
// says what).
func taskOfReview(rv engine.Review) task {
	t := task{TaskID: taskID(rv.Gated.SagaID, rv.Gated.Seq), Status: "completed", StatusMessage: string(rv.State),
		CreatedAt: stamp(rv.Gated.Timestamp), LastUpdatedAt: stamp(rv.Gated.Timestamp), PollInterval: float64(pollEvery.Milliseconds())}
	if n := len(rv.Journal); n > 0 {
		t.LastUpdatedAt = stamp(rv.Journal[n-1].Timestamp)
	}
	switch {
	case rv.State == engine.StateUndecided:
		t.Status, t.StatusMessage = "input_required", rv.Tally.Progress()
	case rv.State == engine.StateApproved && !rv.Tally.RunsFrom.IsZero():
		t.Status, t.StatusMessage = "working", rv.Tally.Progress() // "…; approved; may run from …"
	case rv.State == engine.StateApproved:
		t.Status, t.StatusMessage = "working", "approved: "+rv.Tally.Progress()+"; executing"
	case rv.Waiting():
		t.Status, t.StatusMessage = "working", "executing"
	case rv.State == engine.StateCancelled:
		t.Status = "cancelled"
	}
	return t
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// createdTask is the answer to a call that became a task.
type createdTask struct {
	mcp.ResultBase
	Task task `json:"task"`
}

// taskResult is tasks/get's and tasks/cancel's answer: the task.
type taskResult struct {
	mcp.ResultBase
	task
}

// taskParams are the params of tasks/*.
type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// extraKey holds a request's RequestExtra in its context: the SDK hands
// custom methods no RequestExtra, and the principal is in it.
type extraKey struct{}

// tasks is the receiving middleware of tasks: see the top of this file.
func (g *Gateway) tasks(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ctx = context.WithValue(ctx, extraKey{}, req.GetExtra())
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.InitializeResult:
			return withTasks{r}, nil
		case *mcp.ListToolsResult:
			return toolsWithTasks{r, g.gated}, nil
		case *mcp.CallToolResult:
			// A call of a gated tool that asked for a task answers its
			// request's task, whatever became of it (the call sent again
			// under its key once executed answers the task completed); one
			// refused before any request was made answers as it is.
			call, _ := req.(*mcp.CallToolRequest)
			out, ok := r.StructuredContent.(wire.CallResult)
			if call == nil || !tasked(call.Extra) || !ok || !g.gated[call.Params.Name] {
				return r, nil
			}
			p, err := caller(call.Session, call.Extra)
			if err != nil {
				return nil, err
			}
			rv, err := g.request(ctx, p, out.SagaID, out.JournalSeq)
			if err != nil {
				return r, nil
			}
			return &createdTask{Task: taskOfReview(rv)}, nil
		}
		return res, nil
	}
}

// withTasks is initialize's answer with the tasks capability, which the
// SDK's capabilities cannot hold: tasks of tools/call, and their cancel.
type withTasks struct{ *mcp.InitializeResult }

func (w withTasks) MarshalJSON() ([]byte, error) {
	return amended(w.InitializeResult, func(m map[string]any) {
		if caps, ok := m["capabilities"].(map[string]any); ok {
			caps["tasks"] = map[string]any{"cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
		}
	})
}

// toolsWithTasks is tools/list's answer with the tools whose calls may
// become tasks (the gated ones) saying so, which the SDK's Tool cannot.
type toolsWithTasks struct {
	*mcp.ListToolsResult
	gated map[string]bool
}

func (l toolsWithTasks) MarshalJSON() ([]byte, error) {
	return amended(l.ListToolsResult, func(m map[string]any) {
		tools, _ := m["tools"].([]any)
		for _, t := range tools {
			if t, ok := t.(map[string]any); ok && l.gated[fmt.Sprint(t["name"])] {
				t["execution"] = map[string]any{"taskSupport": "optional"}
			}
		}
	})
}

// amended is v as JSON, changed by edit.
func amended(v any, edit func(map[string]any)) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // numbers in schemas stay as they were written
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	edit(m)
	return json.Marshal(m)
}

// taskCaller is the principal of a tasks/* request, and the saga and
// seq of its task. A task id that names nothing, or a request without a
// principal, is an error the client reads (see taskError).
func taskCaller(ctx context.Context, ss *mcp.ServerSession, params *taskParams) (engine.Principal, string, int64, error) {
	extra, _ := ctx.Value(extraKey{}).(*mcp.RequestExtra)
	p, err := caller(ss, extra)
	if err != nil {
		return p, "", 0, err
	}
	saga, seq, err := taskOf(params.TaskID)
	return p, saga, seq, err
}

// taskError is how tasks/* answers an engine error: a task that does not
// exist or is not the caller's to read is -32602, as the tasks utility
// says, with the engine's words; the store down, as failed says.
func taskError(err error) error {
	e, ok := actionable(err)
	if !ok {
		return errTryLater
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: e.Msg}
}

// taskGet is tasks/get: the request as it stands. An approved request is
// the caller's own call going on, so it executes now (as Execute does,
// once however many ask), and the task says what became of it.
func (g *Gateway) taskGet(ctx context.Context, ss *mcp.ServerSession, params *taskParams) (*taskResult, error) {
	p, saga, seq, err := taskCaller(ctx, ss, params)
	if err != nil {
		return nil, taskError(err)
	}
	rv, err := g.request(ctx, p, saga, seq)
	if err == nil && rv.State == engine.StateApproved {
		if _, err = g.engine.Execute(ctx, p, saga, seq); err == nil || engine.IsKind(err, engine.Conflict) {
			rv, err = g.request(ctx, p, saga, seq)
		}
	}
	if err != nil {
		return nil, taskError(err)
	}
	return &taskResult{task: taskOfReview(rv)}, nil
}

// taskResultOf is tasks/result: it holds until the request is decided
// (Await, at most resultWait; with notifications/progress if it carried
// a progressToken), and answers as answer does: the tool's
// result once approved, or what became of the request (a rejection with
// its reason) as a tool error.
func (g *Gateway) taskResultOf(ctx context.Context, ss *mcp.ServerSession, params *taskParams) (*mcp.CallToolResult, error) {
	p, saga, seq, err := taskCaller(ctx, ss, params)
	if err != nil {
		return nil, taskError(err)
	}
	wait, cancel := g.waiting(ctx, resultWait)
	defer cancel()
	if token := params.Meta["progressToken"]; token != nil {
		go g.tell(wait, ss, token) // as a held call does
	}
	rv, err := g.engine.Await(wait, p, saga, seq)
	if err != nil {
		return nil, taskError(err)
	}
	if rv.Waiting() {
		return nil, fmt.Errorf("task %s is not done: %s", params.TaskID, taskOfReview(rv).StatusMessage)
	}
	r, err := g.answer(ctx, p, rv)
	if r != nil {
		r.Meta = mcp.Meta{relatedTask: map[string]any{"taskId": params.TaskID}}
	}
	return r, err
}

// taskCancel is tasks/cancel: the requester takes its request back
// (Engine.Cancel: journaled, the saga going on, nothing compensated),
// and the task is cancelled. One no longer pending (decided, executing,
// executed) is -32602, saying what became of it, and nothing changes.
func (g *Gateway) taskCancel(ctx context.Context, ss *mcp.ServerSession, params *taskParams) (*taskResult, error) {
	p, saga, seq, err := taskCaller(ctx, ss, params)
	if err != nil {
		return nil, taskError(err)
	}
	if _, err := g.engine.Cancel(ctx, p, saga, seq, ""); err != nil {
		return nil, taskError(err)
	}
	rv, err := g.request(ctx, p, saga, seq)
	if err != nil {
		return nil, taskError(err)
	}
	return &taskResult{task: taskOfReview(rv)}, nil
}

// tasked reports whether a call asked to become a task.
func tasked(extra *mcp.RequestExtra) bool {
	return extra != nil && extra.Header.Get(taskHeader) != ""
}
