package testkit

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Cutter is a TCP proxy to PostgreSQL whose connections a test can cut,
// as a failed network or a database restart would.
type Cutter struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
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
		c.conns = append(c.conns, in, out)
		c.mu.Unlock()
		go func() { io.Copy(out, in); out.Close() }()
		go func() { io.Copy(in, out); in.Close() }()
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
	c.conns = nil
}

// Restore lets connections through again.
func (c *Cutter) Restore() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = false
}
