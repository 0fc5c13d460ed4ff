package rpc

import (
	"encoding/binary"
	"net"
)

// yamux writes every frame as two writes on the connection, its 12-byte
// header and then its body: two system calls (with TLS, two records) for
// each message of every call. frameConn, under a yamux session, holds
// back the header of a data frame with a body and writes it together with
// that body, which yamux's send loop (the connection's only writer)
// always writes next. The bytes on the wire are the same.
type frameConn struct {
	net.Conn
	hdr  [yamuxHeaderSize]byte
	held bool
}

const (
	yamuxHeaderSize = 12
	yamuxTypeData   = 0
	// Bodies larger than this are written on their own: the system call
	// saved is small beside them, and copying them is not free.
	maxCoalescedBody = 16 << 10
)

func newFrameConn(c net.Conn) *frameConn { return &frameConn{Conn: c} }

// Write passes p on, except that a data frame's header is held until its
// body comes.
func (c *frameConn) Write(p []byte) (int, error) {
	if c.held {
		c.held = false
		if len(p) > maxCoalescedBody {
			if _, err := c.Conn.Write(c.hdr[:]); err != nil {
				return 0, err
			}
			return c.Conn.Write(p)
		}
		buf := getBuf(yamuxHeaderSize + len(p))
		n := copy(buf, c.hdr[:])
		n += copy(buf[n:], p)
		w, err := c.Conn.Write(buf[:n])
		putBuf(buf)
		return max(w-yamuxHeaderSize, 0), err
	}
	if len(p) == yamuxHeaderSize && p[1] == yamuxTypeData && binary.BigEndian.Uint32(p[8:12]) > 0 {
		copy(c.hdr[:], p)
		c.held = true
		return len(p), nil
	}
	return c.Conn.Write(p)
}
