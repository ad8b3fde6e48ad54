package testkit

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
)

// Cutter is a TCP proxy to PostgreSQL whose connections a test can cut,
// as a failed network or a database restart would, or whose answers it
// can hold back and lose, as a network failing between a statement and
// its answer would.
type Cutter struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	back   []*answers // what the database sends on each connection
	down   bool
}

// NewCutter listens on a free loopback port and forwards to target
// (host:port) until the test ends.
func NewCutter(t testing.TB, target string) *Cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cutter{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); c.Cut() })
	go c.serve()
	return c
}

// Addr is the proxy's host:port.
func (c *Cutter) Addr() string { return c.ln.Addr().String() }

func (c *Cutter) serve() {
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
		if c.down { // cut while dialling
			c.mu.Unlock()
			in.Close()
			out.Close()
			continue
		}
		a := &answers{to: in, released: make(chan struct{})}
		c.conns, c.back = append(c.conns, in, out), append(c.back, a)
		c.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); out.Close() }()
		go func() { a.carry(out); in.Close() }()
	}
}

// Cut closes every connection and refuses new ones until Restore.
func (c *Cutter) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = true
	for _, conn := range c.conns {
		conn.Close()
	}
	for _, a := range c.back {
		a.mu.Lock()
		if a.holding {
			a.holding, a.kept = false, nil // lost with the connection
			close(a.released)
		}
		a.mu.Unlock()
	}
	c.conns, c.back = nil, nil
}

// Restore lets connections through again.
func (c *Cutter) Restore() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = false
}

// Hold keeps back, on every open connection, what the database sends
// from now on, until Drop (or Cut): its clients wait for their answers,
// while the database has done what they asked. Call it between answers,
// before a client sends what the test wants to lose the answer to.
func (c *Cutter) Hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.back {
		a.mu.Lock()
		a.holding = true
		a.mu.Unlock()
	}
}

// Drop ends Hold and loses, on each held connection, the database's next
// answer, up to and including its ReadyForQuery: what the database sends
// after it (the FATAL error of a backend terminated since, say) goes
// through, so the client reads that in its place.
func (c *Cutter) Drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.back {
		a.mu.Lock()
		if a.holding {
			a.holding, a.dropping = false, true
			a.flush()
			close(a.released)
		}
		a.mu.Unlock()
	}
}

// answers carries what the database sends on one connection to its
// client, holding it back or dropping an answer when told.
type answers struct {
	to       net.Conn
	mu       sync.Mutex
	holding  bool   // keep what comes
	dropping bool   // lose what comes, up to and including a ReadyForQuery
	kept     []byte // what came while holding or dropping, not yet sent
	released chan struct{}
}

// carry copies what from sends to the client until from ends; what is
// held when it ends waits for Drop.
func (a *answers) carry(from net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		a.mu.Lock()
		if a.holding || a.dropping {
			a.kept = append(a.kept, buf[:n]...)
			a.flush()
		} else if n > 0 {
			_, _ = a.to.Write(buf[:n])
		}
		holding := a.holding
		a.mu.Unlock()
		if err != nil {
			if holding {
				<-a.released
			}
			return
		}
	}
}

// flush drops the kept messages while dropping, through the first
// ReadyForQuery, and then sends the rest; a.mu is held. Each message is
// a type byte and a length that counts itself and the body.
func (a *answers) flush() {
	for a.dropping && len(a.kept) >= 5 {
		size := 1 + int(binary.BigEndian.Uint32(a.kept[1:5]))
		if len(a.kept) < size {
			return
		}
		a.dropping = a.kept[0] != 'Z'
		a.kept = a.kept[size:]
	}
	if !a.holding && !a.dropping && len(a.kept) > 0 {
		_, _ = a.to.Write(a.kept)
		a.kept = nil
	}
}
