package mcpgw

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// progressEvery is how often a held call tells its client it still
// waits (when the call carried a progressToken), so that neither the
// client nor a proxy between takes the quiet connection for a dead one.
// A variable for tests.
var progressEvery = 15 * time.Second

// held holds a gated call of a client that did not ask for a task, up to
// g.hold, until a person decides its request (Await wakes on the
// decision, on any replica), then answers as answer does: the tool's
// result once approved, a rejection with its reason. Still undecided
// when the hold ends (or the server stops), it answers as a call that is
// not held. While it waits it sends notifications/progress every
// progressEvery if the call carried a progressToken.
func (g *Gateway) held(ctx context.Context, req *mcp.CallToolRequest, p engine.Principal, r engine.CallResult) (*mcp.CallToolResult, error) {
	wait, cancel := g.waiting(ctx, g.hold)
	defer cancel()
	if token := req.Params.GetProgressToken(); token != nil {
		go g.tell(wait, req.Session, token)
	}
	rv, err := g.engine.Await(wait, p, r.SagaID, r.Seq)
	if err != nil || rv.Waiting() {
		return called(r, nil)
	}
	return g.answer(ctx, p, rv)
}

// waiting is ctx for a wait of at most d, which also ends when the
// server stops: shutting down waits for no held call.
func (g *Gateway) waiting(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	wait, cancel := context.WithTimeout(ctx, d)
	stop := context.AfterFunc(g.ctx, cancel)
	return wait, func() { stop(); cancel() }
}

// tell sends progress notifications until ctx ends.
func (g *Gateway) tell(ctx context.Context, ss *mcp.ServerSession, token any) {
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n),
			Message: fmt.Sprintf("waiting for a person's decision (%s so far)", (time.Duration(n) * progressEvery).Round(time.Second))})
		if err != nil && ctx.Err() == nil {
			g.log.Warn("telling a held MCP call's client it still waits", "err", err)
		}
	}
}
