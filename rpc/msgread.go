package rpc

import (
	"errors"
	"fmt"
	"io"

	"github.com/weft-sched/weft/internal/msgpackscan"
)

// Read buffers. A connection waits for its next message without one (it
// reads the first byte into a one-byte array), so an idle connection or
// stream holds no buffer; a message is read into a pooled buffer that
// grows, by doubling, only as bytes arrive.
const (
	readBufSize    = 4 << 10 // a buffer's starting size
	readSlackBytes = readBufSize
)

// msgReader takes whole msgpack values off a stream, each bounded in bytes,
// without decoding them. With mem set, its buffer is charged to mem before
// it is taken or grown: a value whose buffer does not fit is refused with
// mem's error (errNoMemory), and the stream must be closed.
type msgReader struct {
	r        io.Reader
	buf      []byte // nil while idle; buf[off:end] is read but not returned
	off, end int
	scan     msgpackscan.Scanner
	first    [1]byte
	mem      *connMemory
}

// errSkipped is a value longer than the reader could keep, read past
// without being kept: the stream is still in step.
var errSkipped = errors.New("value skipped")

// next returns the next whole value, of at most limit bytes. The bytes are
// valid until the next call of next or release. At a clean end of stream
// before any byte of a value it returns io.EOF; inside a value,
// io.ErrUnexpectedEOF. A value longer than limit is ErrTooLarge; the
// stream is then out of step and must be closed.
func (m *msgReader) next(limit int) ([]byte, error) {
	return m.nextKept(limit, limit)
}

// nextKept is next for a value that may be up to limit bytes long but
// that is kept only up to keep bytes: a longer one is reported with
// errSkipped as soon as it is known to be longer, and must then be read
// past with scanOver before anything else is read.
func (m *msgReader) nextKept(keep, limit int) ([]byte, error) {
	if m.off == m.end {
		m.off, m.end = 0, 0
		if m.buf == nil {
			if err := m.readFirst(); err != nil {
				return nil, err
			}
		}
	}
	m.scan.Reset(limit)
	start, scanned := m.off, m.off
	for {
		if scanned < m.end {
			n, done, err := m.scan.Scan(m.buf[scanned:m.end])
			scanned += n
			if err != nil {
				if errors.Is(err, msgpackscan.ErrTooLarge) {
					return nil, fmt.Errorf("%w (%v)", ErrTooLarge, err)
				}
				return nil, Errorf(CodeBadRequest, "malformed msgpack: %w", err)
			}
			if done {
				m.off = scanned
				return m.buf[start:scanned], nil
			}
		}
		if m.scan.AtLeast() > uint64(keep) {
			m.off = scanned
			return nil, errSkipped
		}
		if m.end == len(m.buf) {
			var err error
			if start, scanned, err = m.makeRoom(start, scanned, keep); err != nil {
				return nil, err
			}
		}
		n, err := m.r.Read(m.buf[m.end:])
		m.end += n
		if err != nil && n == 0 {
			if errors.Is(err, io.EOF) {
				if scanned == start && m.end == start {
					return nil, io.EOF
				}
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// readFirst waits for the first byte of the next value, then takes a
// buffer for the rest.
func (m *msgReader) readFirst() error {
	for {
		n, err := m.r.Read(m.first[:])
		if n == 1 {
			break
		}
		if err != nil {
			return err
		}
	}
	if err := m.mem.take(bufSize(readBufSize)); err != nil {
		return err
	}
	m.buf = getBuf(readBufSize)
	m.buf[0] = m.first[0]
	m.off, m.end = 0, 1
	return nil
}

// makeRoom frees space after m.end: it moves the value being read to the
// front of the buffer, or grows the buffer by doubling, never past what a
// value of limit bytes needs. It returns start and scanned moved along,
// or why the buffer could not grow.
func (m *msgReader) makeRoom(start, scanned, limit int) (int, int, error) {
	if start > 0 {
		copy(m.buf, m.buf[start:m.end])
		m.end -= start
		scanned -= start
		start = 0
		m.off = 0
		if m.end < len(m.buf) {
			return start, scanned, nil
		}
	}
	size := min(2*len(m.buf), max(limit, 0)+readSlackBytes)
	if size <= len(m.buf) {
		size = len(m.buf) + readSlackBytes
	}
	if err := m.mem.take(bufSize(size)); err != nil {
		return start, scanned, err
	}
	grown := getBuf(size)
	copy(grown, m.buf[:m.end])
	m.putBuf()
	m.buf = grown
	return start, scanned, nil
}

// discard reads past the next value, of at most limit bytes, without
// keeping it: the buffer never grows, whatever the value's size. It is how
// a request refused before its body is read is stepped over.
func (m *msgReader) discard(limit int) error {
	if m.off == m.end {
		m.off, m.end = 0, 0
		if m.buf == nil {
			if err := m.readFirst(); err != nil {
				return err
			}
		}
	}
	m.scan.Reset(limit)
	return m.scanOver()
}

// scanOver scans on from m.off to the end of the value the scanner is in,
// dropping its bytes as they are scanned (the scanner remembers what it
// needs of them) and reading more into the buffer as it is, never grown.
// It reads past refused requests only: what it scans is charged to the
// client as refused bytes (refusals.go).
func (m *msgReader) scanOver() error {
	for {
		if m.off < m.end {
			n, done, err := m.scan.Scan(m.buf[m.off:m.end])
			m.off += n
			m.mem.refuse(int64(n))
			if err != nil {
				if errors.Is(err, msgpackscan.ErrTooLarge) {
					return fmt.Errorf("%w (%v)", ErrTooLarge, err)
				}
				return Errorf(CodeBadRequest, "malformed msgpack: %w", err)
			}
			if done {
				return nil
			}
		}
		m.off, m.end = 0, 0
		n, err := m.r.Read(m.buf)
		m.end = n
		if err != nil && n == 0 {
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
}

// release returns the buffer to the pool once nothing read is left in it;
// a large buffer holding only the start of the next message is traded for
// a small one.
func (m *msgReader) release() {
	left := m.end - m.off
	switch {
	case m.buf == nil:
	case left == 0:
		m.dropBuf()
		m.off, m.end = 0, 0
	case len(m.buf) > readBufSize && left <= readBufSize && m.mem.take(bufSize(readBufSize)) == nil:
		small := getBuf(readBufSize)
		copy(small, m.buf[m.off:m.end])
		m.putBuf()
		m.buf, m.off, m.end = small, 0, left
	}
}

// dropBuf gives the buffer back to the pool.
func (m *msgReader) dropBuf() {
	m.putBuf()
	m.buf = nil
}

// putBuf gives the buffer back to the pool, and what it was charged.
func (m *msgReader) putBuf() {
	m.mem.give(int64(len(m.buf)))
	putBuf(m.buf)
}
