package raftnode

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/weft-sched/weft/internal/msgpackscan"
)

// Raft message bounds (SPEC §15). hashicorp/raft's network transport reads
// each message as a type byte and one msgpack value, decoding as bytes
// arrive with no limit of its own; an InstallSnapshot message is followed
// by the snapshot, as many raw bytes as its header's Size, which the
// transport streams to the snapshot store. So every message a server
// accepts is bounded by what weft itself writes:
//
//   - a command is at most MaxCommand (2 MiB) bytes: Server.apply
//     refuses a bigger one with ErrTooLarge before it reaches the log. That
//     is far above any command weft makes (a plan of 4,096 placements is
//     about 0.5 MB; an AM.Allocate would need some 13,000 distinct asks),
//     though below the 8 MiB a request may be;
//   - an AppendEntries message carries at most MaxAppendEntries (32)
//     entries (Raft's MaxAppendEntries, lowered from its default of 64 to
//     keep the bound small), each a command and some framing;
//   - an InstallSnapshot header carries the configuration, a few kilobytes.
//
// A message past its bound closes the connection before the transport has
// read all of it: MaxMessage is about 65 MiB, where before any length
// was accepted. MaxAppendEntries is also Raft's group commit size, which
// is why it is 32 with 2 MiB commands rather than 8 with 9 MiB ones (8
// cost concurrent writes 40% of their throughput; docs/benchmarks.md). Any
// change must keep MaxAppendEntries × MaxCommand within the bound,
// or a batch of large entries could never replicate.
const (
	MaxAppendEntries  = 32
	MaxCommand        = 2 << 20
	entryOverhead     = 4 << 10 // index, term, type, extensions, timestamp and framing
	MaxMessage        = MaxAppendEntries*(MaxCommand+entryOverhead) + 1<<20
	MaxSnapshotHeader = 1 << 20
)

// installSnapshotType is the type byte of hashicorp/raft's InstallSnapshot
// message (net_transport.go: rpcAppendEntries, rpcRequestVote,
// rpcInstallSnapshot, ...).
const installSnapshotType = 2

// FrameConn is an accepted Raft connection that follows the messages
// read from it, and closes it when one passes its bound. Until its first
// whole message has arrived the connection keeps a read deadline (the
// listener's handshake timeout), pushed back by every read that brings
// bytes, so that a silent connection is closed but a large first message
// on a slow link is not.
type FrameConn struct {
	net.Conn
	maxMessage int
	handshake  time.Duration

	inMessage    bool // the type byte is read; the value is being scanned
	msgType      byte
	scan         msgpackscan.Scanner
	snapHeader   []byte // an InstallSnapshot header, to learn its Size
	snapshotLeft int64  // snapshot bytes still to pass
	started      bool
	err          error
}

func NewFrameConn(c net.Conn, maxMessage int, handshake time.Duration) *FrameConn {
	return &FrameConn{Conn: c, maxMessage: maxMessage, handshake: handshake}
}

// Read reads from the connection and follows the messages read; once one
// is out of bounds it closes the connection and fails every read.
func (c *FrameConn) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		if ferr := c.follow(p[:n]); ferr != nil {
			c.err = ferr
			c.Conn.Close()
			return 0, ferr
		}
		if !c.started {
			c.Conn.SetReadDeadline(time.Now().Add(c.handshake))
		}
	}
	return n, err
}

// follow advances through b, the next bytes of the stream.
func (c *FrameConn) follow(b []byte) error {
	for len(b) > 0 {
		switch {
		case c.snapshotLeft > 0:
			k := min(c.snapshotLeft, int64(len(b)))
			c.snapshotLeft -= k
			b = b[k:]
		case !c.inMessage:
			c.msgType, b = b[0], b[1:]
			c.inMessage = true
			limit := c.maxMessage
			if c.msgType == installSnapshotType {
				limit = min(limit, MaxSnapshotHeader)
				c.snapHeader = c.snapHeader[:0]
			}
			c.scan.Reset(limit)
		default:
			n, done, err := c.scan.Scan(b)
			if c.msgType == installSnapshotType {
				c.snapHeader = append(c.snapHeader, b[:n]...)
			}
			b = b[n:]
			if err != nil {
				if errors.Is(err, msgpackscan.ErrTooLarge) {
					return fmt.Errorf("raft message of type %d is larger than %d bytes: %w", c.msgType, c.maxMessage, err)
				}
				return fmt.Errorf("raft message of type %d: %w", c.msgType, err)
			}
			if !done {
				continue
			}
			c.inMessage = false
			if !c.started {
				c.started = true
				c.Conn.SetReadDeadline(time.Time{}) // a whole message: the handshake is over
			}
			if c.msgType == installSnapshotType {
				var hdr struct{ Size int64 }
				if err := codec.NewDecoderBytes(c.snapHeader, &codec.MsgpackHandle{}).Decode(&hdr); err != nil || hdr.Size < 0 {
					return fmt.Errorf("raft InstallSnapshot header without a valid size (%v)", err)
				}
				c.snapshotLeft = hdr.Size
				c.snapHeader = nil
			}
		}
	}
	return nil
}
