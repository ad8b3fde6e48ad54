package mcpgw

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/sagacity-go/sagacity/internal/edge"
)

// served are the requests /mcp answers, by method: those of an MCP
// server that the SDK implements. The SDK's streamable handler answers a
// request of any other method with a plain-text 400 (before protocol
// 2026-07-28), which no JSON-RPC client reads as an answer; the gateway
// answers it as JSON-RPC says, -32601 Method not found (see screen).
// completion/complete is the SDK's to refuse, as a JSON-RPC error too;
// and so are the methods of protocol 2026-07-28, which the SDK speaks
// only without sessions (here a session is a saga): it answers them
// -32022 with the versions served, and the client falls back to one.
var served = map[string]bool{
	"initialize": true, "ping": true, "logging/setLevel": true, "completion/complete": true,
	"server/discover": true, "subscriptions/listen": true,
	"tools/list": true, "tools/call": true, "prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	methodTaskGet: true, methodTaskResult: true, methodTaskCancel: true,
}

// taskHeader marks, to the gateway's own handlers, an HTTP request whose
// tools/call asks to become a task (params.task, of the tasks utility):
// the SDK reads no params.task, but hands its handlers the request's
// header. The client's own value of it is never kept.
const taskHeader = "Sagacity-Mcp-Task"

// screen reads a POSTed JSON-RPC request before the SDK does. One of a
// method /mcp does not serve it answers with a JSON-RPC error, -32601
// Method not found, and reports that it did; a tools/call that asks for a
// task it marks (taskHeader). Anything else it leaves to the SDK, with
// the body to read again: notifications (which JSON-RPC answers not at
// all), answers to the server's own requests, batches and bodies that are
// no JSON-RPC. It returns the method of a request it leaves to the SDK.
// Errors: reading the body (413 over the server's cap).
func screen(w http.ResponseWriter, r *http.Request) (method string, answered bool, err error) {
	r.Header.Del(taskHeader)
	if r.Method != http.MethodPost {
		return "", false, nil
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return "", false, edge.BodyError(err)
	}
	msg, err := jsonrpc.DecodeMessage(body)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || !req.IsCall() {
		return "", false, nil
	}
	if served[req.Method] {
		var params struct {
			Task json.RawMessage `json:"task"`
		}
		if req.Method == "tools/call" && json.Unmarshal(req.Params, &params) == nil && len(params.Task) > 0 && string(params.Task) != "null" {
			r.Header.Set(taskHeader, "1")
		}
		return req.Method, false, nil
	}
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID,
		Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("Method not found: %q", req.Method)}})
	if err != nil {
		return "", false, err
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
	return req.Method, true, nil
}
