package rpc

import (
	"errors"
	"fmt"
	"io"
	"net/rpc"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// MaxRequestSize bounds a request (header and body) twice: the bytes it
// takes on the wire, and what decoding it allocates.
const MaxRequestSize = 8 << 20

// MsgpackHandle is the codec configuration shared by every weft RPC peer.
// MaxInitLen is left at the codec's default, which pre-allocates at most
// 256 KiB for any declared length and grows only as bytes actually arrive,
// so a message that claims a huge string or collection cannot allocate more
// than it sends (a smaller value makes large byte strings quadratic).
// MaxDepth bounds nesting so hostile input cannot exhaust the stack.
var MsgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.RawToString = true
	h.WriteExt = true
	h.MaxDepth = 64
	return h
}()

// maxHeaderSize bounds a request's net/rpc header: the method's name, the
// sequence number and the caller's credential (an ACL token or a workload
// token, see credentialed).
const maxHeaderSize = 4 << 10

// ServerCodec is the server side of msgpack RPC on one connection or stream.
// A request is a header, read first (at most maxHeaderSize bytes), then a
// body, which the server reads only once the header has said who is asking
// for what (Server.ServeConn): its size on the wire is bounded by the
// method, and what it would decode to by a budget that grows with that
// bound. It is read whole, without decoding, then its decoded size is
// checked against the budget (checkDecodeCost), and only then decoded. A
// body that would decode to more is refused with ErrTooLarge and the
// connection goes on; a request longer than its bound, or that cannot be
// decoded, poisons the codec: the connection is then closed, because the
// stream can no longer be trusted to be in step. On a connection a
// Listener accepted, the read buffer and the decoded request are charged
// to the connection's request memory (memory.go).
type ServerCodec struct {
	conn   io.ReadWriteCloser
	rd     msgReader
	broken atomic.Bool
	onErr  func(error)

	// Of the current request, once its header is read: the credential
	// its header carries, and what is left of its budgets for
	// ReadRequestBody.
	token     string
	bytesLeft int
	costLeft  int64
	method    string

	wmu sync.Mutex
}

// NewServerCodec returns a server codec over conn. onErr, if not nil, is told
// why a connection is being dropped (it is never told about a clean EOF).
func NewServerCodec(conn io.ReadWriteCloser, onErr func(error)) *ServerCodec {
	c := &ServerCodec{conn: conn, rd: msgReader{r: conn}, onErr: onErr}
	if m, ok := conn.(interface{ requestMemory() *connMemory }); ok {
		c.rd.mem = m.requestMemory()
	}
	return c
}

// ReadRequestHeader reads the next request's header.
func (c *ServerCodec) ReadRequestHeader(r *rpc.Request) error {
	if c.broken.Load() {
		return errors.New("connection closed after a malformed request")
	}
	raw, err := c.rd.next(maxHeaderSize)
	if err == nil {
		*r = rpc.Request{}
		c.token = ""
		wr := newWireReader(raw, maxHeaderSize)
		if err = decodeRequestHeader(&wr, r, &c.token); err == nil && wr.pos != len(raw) {
			err = fmt.Errorf("%d bytes after the value", len(raw)-wr.pos)
		}
		c.bytesLeft, c.costLeft, c.method = MaxRequestSize-len(raw), MaxRequestSize-int64(len(raw)), r.ServiceMethod
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		c.fail(fmt.Errorf("malformed request header: %w", err))
	}
	return err
}

// ReadRequestBody reads the body into body, a pointer, or discards it if
// body is nil, within what is left of MaxRequestSize after the header. A
// body that would decode to more than that is refused with an error that
// wraps ErrTooLarge, and the codec stays in step; any other failure
// poisons it.
func (c *ServerCodec) ReadRequestBody(body any) error {
	cost, err := c.readBody(body, c.bytesLeft, c.bytesLeft, c.costLeft)
	c.rd.mem.give(cost)
	return err
}

// skippedBody is a body longer than it could be kept: it must be read
// past (skipBody) before the next request.
type skippedBody struct{ err error }

func (e *skippedBody) Error() string { return e.err.Error() }
func (e *skippedBody) Unwrap() error { return e.err }

// readBody reads the body into body (or discards it if body is nil):
// keeping at most keep bytes (a longer body is refused with a
// *skippedBody, to be read past with skipBody), at most limit bytes on
// the wire (a longer one poisons
// the codec), decoding to at most budget bytes. It returns what the
// decoded body was charged to the connection's request memory, to give
// back once the request has been answered.
func (c *ServerCodec) readBody(body any, keep, limit int, budget int64) (cost int64, err error) {
	raw, err := c.rd.nextKept(keep, limit)
	if err != nil {
		tooLarge := func(n int) error {
			return Errorf(CodeTooLarge, "%s: the request body exceeds the %s this method takes", c.method, byteSize(int64(n)))
		}
		switch {
		case errors.Is(err, errSkipped):
			return 0, &skippedBody{tooLarge(keep)}
		case errors.Is(err, errNoMemory):
			c.fail(err)
		case errors.Is(err, ErrTooLarge):
			err = tooLarge(limit)
			c.fail(fmt.Errorf("refusing request body: %w", err))
		default:
			c.fail(fmt.Errorf("malformed request body: %w", err))
		}
		return 0, err
	}
	defer c.rd.release()
	if body == nil {
		return 0, nil
	}
	if d, ok := body.(wireDecoder); ok {
		// The hand-written decoders charge as they go: what they hold is
		// charged once it is decoded.
		r := newWireReader(raw, budget)
		err := d.decodeMsgpack(&r)
		if err == nil && r.pos != len(raw) {
			err = fmt.Errorf("%d bytes after the value", len(raw)-r.pos)
		}
		if err != nil {
			if over := (*overBudget)(nil); errors.As(err, &over) {
				return 0, fmt.Errorf("%s: %w: %v", c.method, ErrTooLarge, over)
			}
			c.fail(fmt.Errorf("malformed request body: %w", err))
			return 0, err
		}
		return c.chargeDecoded(budget - r.left)
	}
	cost, err = checkDecodeCost(raw, typeOfPointee(body), budget)
	if err != nil {
		var over *overBudget
		if errors.As(err, &over) {
			return 0, fmt.Errorf("%s: %w: %v", c.method, ErrTooLarge, over)
		}
		c.fail(fmt.Errorf("malformed request body: %w", err))
		return 0, err
	}
	if cost, err = c.chargeDecoded(cost); err != nil {
		return 0, err
	}
	if err := decodeBytes(raw, body); err != nil {
		c.rd.mem.give(cost)
		c.fail(fmt.Errorf("malformed request body: %w", err))
		return 0, err
	}
	return cost, nil
}

// chargeDecoded charges a decoded request's cost to the connection's
// request memory; a cost that does not fit poisons the codec.
func (c *ServerCodec) chargeDecoded(cost int64) (int64, error) {
	if err := c.rd.mem.take(cost); err != nil {
		c.fail(err)
		return 0, err
	}
	return cost, nil
}

// skipBody reads past the rest of a body readBody refused as longer than
// it could keep, without keeping it. Failing to poisons the codec.
func (c *ServerCodec) skipBody() error {
	if err := c.rd.scanOver(); err != nil {
		c.fail(fmt.Errorf("reading past a refused request's body: %w", err))
		return err
	}
	c.rd.release()
	return nil
}

// discardBody steps over the current request's body, of at most limit
// bytes, without keeping it: the answer to a request refused before its
// body was read. A longer body, or one that is not msgpack, poisons the
// codec.
func (c *ServerCodec) discardBody(limit int) error {
	err := c.rd.discard(limit)
	if err != nil {
		c.fail(fmt.Errorf("discarding a refused request's body: %w", err))
		return err
	}
	c.rd.release()
	return nil
}

// WriteResponse writes a response header and body in one write.
func (c *ServerCodec) WriteResponse(r *rpc.Response, body any) error {
	return writeMessage(&c.wmu, c.conn, r, body)
}

// Close closes the connection and lets go of the read buffer. Call it once
// nothing reads any more.
func (c *ServerCodec) Close() error {
	err := c.conn.Close()
	if c.rd.buf != nil {
		c.rd.dropBuf()
	}
	return err
}

func (c *ServerCodec) fail(err error) {
	c.broken.Store(true)
	if c.onErr != nil {
		c.onErr(err)
	}
}

// writeBuf is a pooled response encoder and its output.
// writeMessage encodes a header and its body into a pooled buffer and
// writes both to conn in one write under mu, so that concurrent writers
// never interleave their messages.
// A body with a hand-written codec (fastcodec.go) is written with it,
// and so is its net/rpc header.
func writeMessage(mu *sync.Mutex, conn io.Writer, header, body any) error {
	w := writeBufs.Get().(*writeBuf)
	defer w.put()
	w.b = w.b[:0]
	if req, ok := header.(*rpc.Request); ok {
		// A request header carries the body's credential: the server
		// checks it before it reads the body.
		token := credentialOf(body)
		if e, ok := body.(wireEncoder); ok {
			w.b = appendRequestHeader(w.b, req, token)
			w.b = e.appendMsgpack(w.b)
		} else {
			w.hdr = wireRequestHeader{AuthToken: token, Seq: req.Seq, ServiceMethod: req.ServiceMethod}
			w.enc.ResetBytes(&w.b)
			if err := w.enc.Encode(&w.hdr); err != nil {
				return err
			}
			if err := w.enc.Encode(body); err != nil {
				return err
			}
		}
	} else if !appendFast(&w.b, header, body) {
		w.enc.ResetBytes(&w.b)
		if err := w.enc.Encode(header); err != nil {
			return err
		}
		if err := w.enc.Encode(body); err != nil {
			return err
		}
	}
	mu.Lock()
	defer mu.Unlock()
	_, err := conn.Write(w.b)
	return err
}

type writeBuf struct {
	b   []byte
	enc *codec.Encoder
	hdr wireRequestHeader
}

// wireRequestHeader is net/rpc's request header as weft's clients write
// it: rpc.Request's fields, and the request's credential when it has one
// (see appendRequestHeader, which writes the same bytes by hand).
type wireRequestHeader struct {
	AuthToken     string `codec:"AuthToken,omitempty"`
	Seq           uint64
	ServiceMethod string
}

var writeBufs = sync.Pool{New: func() any {
	w := &writeBuf{}
	w.enc = codec.NewEncoderBytes(&w.b, MsgpackHandle)
	return w
}}

func (w *writeBuf) put() {
	if cap(w.b) > 1<<maxBufClass {
		w.b = nil
	}

	writeBufs.Put(w)
}

// checkedHandle decodes messages whose decoded size checkDecodeCost has
// bounded. It is MsgpackHandle, except that it allocates every declared
// collection whole at once (the check has seen every element): growing a
// long slice a quarter at a time would allocate five times its size.
var checkedHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.RawToString = MsgpackHandle.RawToString
	h.WriteExt = MsgpackHandle.WriteExt
	h.MaxDepth = MsgpackHandle.MaxDepth
	h.MaxInitLen = MaxRequestSize
	return h
}()

var decoders = sync.Pool{New: func() any { return codec.NewDecoderBytes(nil, checkedHandle) }}

// decodeBytes decodes raw, a message checkDecodeCost has accepted, into
// out with a pooled decoder. Decoded strings and byte slices are copies:
// raw may be reused afterwards.
func decodeBytes(raw []byte, out any) error {
	d := decoders.Get().(*codec.Decoder)
	d.ResetBytes(raw)
	err := d.Decode(out)
	d.ResetBytes(nil)
	decoders.Put(d)
	return err
}

// Encode and Decode are the msgpack helpers for anything that is not an RPC
// call (for example payloads carried inside other messages).
func Encode(v any) ([]byte, error) {
	var out []byte
	err := codec.NewEncoderBytes(&out, MsgpackHandle).Encode(v)
	return out, err
}

// Decode reads msgpack from buf into out.
func Decode(buf []byte, out any) error {
	return codec.NewDecoderBytes(buf, MsgpackHandle).Decode(out)
}
