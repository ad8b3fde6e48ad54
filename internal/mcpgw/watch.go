package mcpgw

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/service"
)

// watch is a subscribed saga: how it looked when last seen, and whom to
// read it as.
type watch struct {
	subscribers int
	reader      engine.Principal
	seen        engine.Saga
}

// watchEvery is how often subscribed sagas are looked at for a change: an
// agent waiting for a decision hears of it at most this late.
const watchEvery = 2 * time.Second

// maxWatched bounds the sagas the gateway watches for all its sessions at
// once: each is read every watchEvery. A variable for tests.
var maxWatched = 10_000

// maxWatchedPerSession bounds one session's subscriptions, so that one
// agent cannot take the watcher for itself. A variable for tests.
var maxWatchedPerSession = 100

// sagaResource begins the URI of a saga's resource: sagaResource + its id.
const sagaResource = "sagacity://saga/"

// sagaAt is the saga a resource's URI names; a URI that names none is a
// resource not found.
func sagaAt(uri string) (string, error) {
	saga, ok := strings.CutPrefix(uri, sagaResource)
	if !ok || saga == "" {
		return "", mcp.ResourceNotFoundError(uri)
	}
	return saga, nil
}

// readSaga reads a saga's resource.
func (g *Gateway) readSaga(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	p, err := caller(req.Session, req.Extra)
	if err != nil {
		return nil, err
	}
	saga, err := sagaAt(req.Params.URI)
	if err != nil {
		return nil, err
	}
	st, err := g.stateOf(ctx, p, saga, 0)
	if engine.IsKind(err, engine.NotFound) {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
}

// subscribe starts watching a saga's resource for its subscriber.
func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	p, err := caller(req.Session, req.Extra)
	if err != nil {
		return err
	}
	saga, err := sagaAt(req.Params.URI)
	if err != nil {
		return err
	}
	// Only a saga the subscriber may read, and one that exists: watches
	// of sagas that do not exist would fill the watcher for nothing.
	s, err := g.engine.Lookup(ctx, p, saga)
	if engine.IsKind(err, engine.NotFound) {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	sess := g.track(req.Session)
	if sess.watching[req.Params.URI] {
		return nil
	}
	if len(sess.watching) >= maxWatchedPerSession {
		return fmt.Errorf("this session watches %d sagas already, the most one session may; unsubscribe from one first", maxWatchedPerSession)
	}
	w, ok := g.watched[req.Params.URI]
	if !ok {
		if len(g.watched) >= maxWatched {
			return fmt.Errorf("the server watches %d sagas already, the most it will; unsubscribe from one first", maxWatched)
		}
		w = &watch{reader: p, seen: s}
		g.watched[req.Params.URI] = w
	}
	w.subscribers++
	sess.watching[req.Params.URI] = true
	return nil
}

// unsubscribe stops the session's watch of a saga.
func (g *Gateway) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sess := g.sessions[req.Session]; sess != nil && sess.watching[req.Params.URI] {
		delete(sess.watching, req.Params.URI)
		g.unwatch(req.Params.URI)
	}
	return nil
}

// unwatch drops one subscriber of a saga's resource, and the watch with
// the last. Callers hold g.mu.
func (g *Gateway) unwatch(uri string) {
	if w, ok := g.watched[uri]; ok {
		if w.subscribers--; w.subscribers <= 0 {
			delete(g.watched, uri)
		}
	}
}

// Watcher tells the subscribers of a saga when it changed: a person
// decided, or a request executed. It looks every Every (default
// watchEvery), at the saga rows alone, so an agent waiting for a decision
// asks nothing itself, and a decision made on another server is seen too:
// a service the server runs.
type Watcher struct {
	Gateway *Gateway
	Every   time.Duration
	service.Base
}

// Start watches the subscribed sagas until Stop or until ctx ends.
func (w *Watcher) Start(ctx context.Context) error {
	return w.Run(ctx, service.Work{Loops: []service.Loop{service.After(cmp.Or(w.Every, watchEvery), w.Gateway.look)}})
}

// look tells the subscribers of each watched saga that changed since it
// was last looked at.
func (g *Gateway) look(ctx context.Context) {
	g.mu.Lock()
	uris := make(map[string]watch, len(g.watched))
	for uri, w := range g.watched {
		uris[uri] = *w
	}
	g.mu.Unlock()
	for uri, w := range uris {
		s, err := g.engine.Lookup(ctx, w.reader, strings.TrimPrefix(uri, sagaResource))
		if err != nil || (s.HeadSeq == w.seen.HeadSeq && s.Status == w.seen.Status) {
			continue
		}
		g.mu.Lock()
		if cur, ok := g.watched[uri]; ok {
			cur.seen = s
		}
		g.mu.Unlock()
		if err := g.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			g.log.Warn("telling subscribers a saga changed", "uri", uri, "err", err)
		}
	}
}
