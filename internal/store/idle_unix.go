//go:build linux || darwin || freebsd

package store

import (
	"net"
	"syscall"
)

// closedWhileIdle reports whether the server ended connection c while it
// sat idle in the pool: the socket is at its end, or holds what the
// server sent unasked (the FATAL error of a terminated backend, the
// server shutting down). It peeks without waiting and reads nothing.
func closedWhileIdle(c net.Conn) bool {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = tc.NetConn() // TLS: its records are on the socket under it
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	// Control, not Read: pgx may have left a read of its own parked on
	// the socket, and a peek must not wait for it.
	_ = raw.Control(func(fd uintptr) {
		var b [1]byte
		// At its end (0 bytes) or holding bytes, the peek succeeds;
		// an idle, open socket has nothing to give yet.
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = err != syscall.EAGAIN && err != syscall.EWOULDBLOCK && err != syscall.EINTR
	})
	return closed
}
