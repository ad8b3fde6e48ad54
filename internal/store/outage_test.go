package store

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
)

// cutter is a TCP proxy to PostgreSQL whose connections the test can cut,
// as a failed network or a database restart would.
type cutter struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	down   bool
}

func newCutter(t *testing.T, target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); c.cut() })
	go c.serve()
	return c
}

func (c *cutter) serve() {
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		down := c.down
		c.mu.Unlock()
		if down {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", c.target)
		if err != nil {
			in.Close()
			continue
		}
		c.mu.Lock()
		c.conns = append(c.conns, in, out)
		c.mu.Unlock()
		go func() { io.Copy(out, in); out.Close() }()
		go func() { io.Copy(in, out); in.Close() }()
	}
}

// cut closes every connection and refuses new ones until restore.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = true
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

func (c *cutter) restore() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = false
}

// TestPostgresOutage cuts the database off in the middle of a call: the
// call returns Unavailable, nothing half-written is left, and the call is
// in doubt rather than lost.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := storetest.PostgresURL(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	px := newCutter(t, u.Host)
	u.Host = px.ln.Addr().String()
	db, err := Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var executed int
	tools := []engine.Tool{
		{Name: "ok", Executor: engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) { return "fine", nil }}},
		{Name: "cutsTheLine", Executor: engine.Funcs{Exec: func(context.Context, engine.Invocation) (string, error) {
			executed++
			px.cut()
			return "done", nil
		}}},
	}
	e, err := engine.New(db, tools)
	if err != nil {
		t.Fatal(err)
	}
	p := engine.Principal{ID: "agent", Roles: engine.Roles}
	if _, err := e.Call(ctx, p, "s", "ok", "{}"); err != nil {
		t.Fatal(err)
	}

	_, err = e.Call(ctx, p, "s", "cutsTheLine", `{"n":1}`)
	if !engine.IsKind(err, engine.Unavailable) || executed != 1 {
		t.Fatalf("Call losing the database after the tool ran: err %v (kind %v), executed %d; want Unavailable after one execution",
			err, engine.KindOf(err), executed)
	}
	_, err = e.Call(ctx, p, "s", "ok", "{}")
	if !engine.IsKind(err, engine.Unavailable) {
		t.Errorf("Call while the database is down: %v, want Unavailable", err)
	}
	if err := db.Ping(ctx); !engine.IsKind(err, engine.Unavailable) {
		t.Errorf("Ping while the database is down: %v, want Unavailable", err)
	}

	px.restore()
	es, err := e.Journal(ctx, p, "s")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range es {
		got = append(got, en.ToolName+" "+string(en.Phase))
	}
	want := []string{"ok INTENT", "ok EXECUTED", "cutsTheLine INTENT"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("journal after the outage (-want +got):\n%s", diff)
	}
	if v, _ := e.Verify(ctx, p, "s"); !v.Valid {
		t.Errorf("Verify after the outage = %+v, want valid: no half-written step", v)
	}
	doubt, err := e.InDoubt(ctx, p, 0)
	if err != nil || len(doubt) != 1 || doubt[0].ToolName != "cutsTheLine" {
		t.Errorf("InDoubt = %+v, %v; want the cut call", doubt, err)
	}
	if r, err := e.Call(ctx, p, "s", "ok", "{}"); err != nil || r.Seq != 4 {
		t.Errorf("Call after the database came back = %+v, %v; want executed at seq 4", r, err)
	}
}
