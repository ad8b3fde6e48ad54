package main

import (
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync/atomic"
)

// roundTrips is a TCP proxy in front of PostgreSQL that counts the round
// trips its clients make: the store opens its own pool, so its
// statements cannot be counted from inside the process. Each Sync
// (extended protocol; pgx sends Parse/Bind/Execute and a Sync together)
// and each simple Query waits for the server's ReadyForQuery: one round
// trip each.
type roundTrips struct {
	ln    net.Listener
	to    string
	count atomic.Int64
}

func newRoundTrips(to string) (*roundTrips, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &roundTrips{ln: ln, to: to}
	go p.serve()
	return p, nil
}

// via is dbURL reached through the proxy.
func (p *roundTrips) via(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	u.Host = p.ln.Addr().String()
	return u.String(), nil
}

func (p *roundTrips) close() { p.ln.Close() }

func (p *roundTrips) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			s, err := net.Dial("tcp", p.to)
			if err != nil {
				return
			}
			defer s.Close()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
			p.client(c, s)
		}()
	}
}

// Startup requests that are answered with one byte and followed by
// another startup message.
const (
	sslRequest    = 80877103
	gssencRequest = 80877104
)

// client forwards what a client sends, counting Sync and Query messages.
// After the startup message (a length and a protocol code, no type), every
// message is a type byte and a length that counts itself.
func (p *roundTrips) client(c, s net.Conn) {
	head := make([]byte, 8)
	for {
		if _, err := io.ReadFull(c, head); err != nil {
			return
		}
		n := int64(binary.BigEndian.Uint32(head[:4]))
		if _, err := s.Write(head); err != nil {
			return
		}
		if _, err := io.CopyN(s, c, n-8); err != nil {
			return
		}
		if code := binary.BigEndian.Uint32(head[4:]); code != sslRequest && code != gssencRequest {
			break
		}
	}
	head = head[:5]
	for {
		if _, err := io.ReadFull(c, head); err != nil {
			return
		}
		if head[0] == 'S' || head[0] == 'Q' {
			p.count.Add(1)
		}
		if _, err := s.Write(head); err != nil {
			return
		}
		if _, err := io.CopyN(s, c, int64(binary.BigEndian.Uint32(head[1:]))-4); err != nil {
			return
		}
	}
}
