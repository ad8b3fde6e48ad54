package mcpgw

import (
	"bytes"
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
// answers it as JSON-RPC says, -32601 Method not found (see unserved).
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
}

// unserved answers a POSTed JSON-RPC request of a method /mcp does not
// serve with a JSON-RPC error, -32601 Method not found, and reports
// whether it did. Anything else it leaves to the SDK, with the body to
// read again: notifications (which JSON-RPC answers not at all), answers
// to the server's own requests, batches and bodies that are no JSON-RPC.
// Errors: reading the body (413 over the server's cap).
func unserved(w http.ResponseWriter, r *http.Request) (bool, error) {
	if r.Method != http.MethodPost {
		return false, nil
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false, edge.BodyError(err)
	}
	msg, err := jsonrpc.DecodeMessage(body)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || !req.IsCall() || served[req.Method] {
		return false, nil
	}
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID,
		Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("Method not found: %q", req.Method)}})
	if err != nil {
		return false, err
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
	return true, nil
}
