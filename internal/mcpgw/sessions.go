package mcpgw

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// sessionHeader names an MCP session in streamable HTTP.
const sessionHeader = "Mcp-Session-Id"

// The bounds of the sessions open at once: each holds memory until it
// ends, or has been idle for sessionIdle. Variables for tests.
var (
	maxSessions     = 1000
	maxSessionsEach = 100
)

// sessionIdle is how long a session may go without a request.
const sessionIdle = 10 * time.Minute

// admit refuses a new session for principal when the sessions open, and
// being opened, are at a bound: Unavailable, saying which; otherwise it
// holds a slot for the session (see opened). A session its client ended
// (DELETE) counts no more; one the SDK ended (idle) once it no longer
// holds it (one just opened may not be listed yet). Sessions the SDK
// keeps only while it answers (a client's server/discover) are not
// counted: every session that lasts was opened through admit.
func (g *Gateway) admit(principal string) error {
	live := map[string]bool{}
	for ss := range g.server.Sessions() {
		live[ss.ID()] = true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	mine, opening := g.opening[principal], 0
	for _, n := range g.opening {
		opening += n
	}
	for id, o := range g.owners {
		switch {
		case !live[id] && time.Since(o.at) > time.Minute:
			delete(g.owners, id)
		case o.principal == principal:
			mine++
		}
	}
	switch {
	case len(g.owners)+opening >= maxSessions:
		return engine.Errorf(engine.Unavailable, "the server has %d MCP sessions open, the most it keeps: try again once one ends", maxSessions)
	case mine >= maxSessionsEach:
		return engine.Errorf(engine.Unavailable, "%s has %d MCP sessions open, the most one principal may: end one (DELETE /mcp) first", principal, maxSessionsEach)
	}
	g.opening[principal]++
	return nil
}

// opened is the answer to a request that may open a session: the
// session is its principal's from the moment its id is sent, before the
// client can open another (see admit).
type opened struct {
	http.ResponseWriter
	g         *Gateway
	principal string
	noted     bool
}

// note takes the slot admit held for the session: the session's, once
// the answer names it, or nobody's.
func (o *opened) note() {
	if o.noted {
		return
	}
	o.noted = true
	g := o.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.opening[o.principal]--; g.opening[o.principal] <= 0 {
		delete(g.opening, o.principal)
	}
	if id := o.Header().Get(sessionHeader); id != "" {
		g.owners[id] = owner{o.principal, time.Now()}
	}
}

func (o *opened) WriteHeader(code int) {
	o.note()
	o.ResponseWriter.WriteHeader(code)
}

func (o *opened) Write(b []byte) (int, error) {
	o.note()
	return o.ResponseWriter.Write(b)
}

func (o *opened) Flush() {
	o.note()
	http.NewResponseController(o.ResponseWriter).Flush()
}

func (o *opened) Unwrap() http.ResponseWriter { return o.ResponseWriter }

// owner is who opened a session, and when.
type owner struct {
	principal string
	at        time.Time
}

// session is who called through an MCP session, and into which sagas.
type session struct {
	principal engine.Principal // once it called a tool
	sagas     map[string]bool  // the sagas it called into
	watching  map[string]bool  // the resources it subscribed to
}

// track returns what the gateway knows of a session, noting it the first
// time, when it starts waiting for the session's end. Callers hold g.mu.
func (g *Gateway) track(ss *mcp.ServerSession) *session {
	s, ok := g.sessions[ss]
	if !ok {
		s = &session{sagas: map[string]bool{}, watching: map[string]bool{}}
		g.sessions[ss] = s
		go g.ended(ss)
	}
	return s
}

// joined notes that session, as p, called into its own saga, so that
// the session's end ends it. A saga a call names outlives the session:
// clients open one session per call, and later sessions name it too.
func (g *Gateway) joined(ss *mcp.ServerSession, p engine.Principal, saga string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.track(ss)
	s.principal = p
	s.sagas[saga] = true
}

// ended waits for a session to end, stops watching what it subscribed to
// and ends its sagas: the agent is done with them (a saga with requests
// pending stays AWAITING_APPROVAL until a person decides them). The SDK
// binds a session to its first request's principal, so every call of it
// was theirs.
func (g *Gateway) ended(ss *mcp.ServerSession) {
	_ = ss.Wait()
	g.mu.Lock()
	s := g.sessions[ss]
	delete(g.sessions, ss)
	for uri := range s.watching {
		g.unwatch(uri)
	}
	g.mu.Unlock()
	if g.ctx.Err() != nil {
		// The server is stopping, not the agent: its sagas stay open for
		// it to go on with.
		return
	}
	ctx, cancel := context.WithTimeout(g.ctx, time.Minute)
	defer cancel()
	for saga := range s.sagas {
		if _, err := g.engine.End(ctx, s.principal, saga); err != nil && !engine.IsKind(err, engine.Conflict) {
			g.log.Warn("ending the saga of an MCP session", "saga", saga, "err", err)
		}
	}
}
