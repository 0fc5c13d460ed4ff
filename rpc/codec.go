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

// ServerCodec is the server side of msgpack RPC on one connection or stream.
// Each request (header and body) may take MaxRequestSize bytes on the wire
// and MaxRequestSize bytes once decoded: it is read whole, without
// decoding, then its decoded size is checked against what is left of the
// budget (checkDecodeCost), and only then decoded. A body that would decode
// to more is refused with ErrTooLarge and the connection goes on; a request
// longer than the byte budget, or that cannot be decoded, poisons the
// codec: net/rpc then closes the connection, because the stream can no
// longer be trusted to be in step.
type ServerCodec struct {
	conn   io.ReadWriteCloser
	rd     msgReader
	broken atomic.Bool
	onErr  func(error)

	// Left of the current request's budgets once its header is read.
	bytesLeft int
	costLeft  int64
	method    string

	wmu sync.Mutex
}

// NewServerCodec returns a server codec over conn. onErr, if not nil, is told
// why a connection is being dropped (it is never told about a clean EOF).
func NewServerCodec(conn io.ReadWriteCloser, onErr func(error)) *ServerCodec {
	return &ServerCodec{conn: conn, rd: msgReader{r: conn}, onErr: onErr}
}

// ReadRequestHeader starts a new request budget and reads its header.
func (c *ServerCodec) ReadRequestHeader(r *rpc.Request) error {
	if c.broken.Load() {
		return errors.New("connection closed after a malformed request")
	}
	raw, err := c.rd.next(MaxRequestSize)
	if err == nil {
		*r = rpc.Request{}
		wr := newWireReader(raw, MaxRequestSize)
		if err = decodeRequestHeader(&wr, r); err == nil && wr.pos != len(raw) {
			err = fmt.Errorf("%d bytes after the value", len(raw)-wr.pos)
		}
		c.bytesLeft, c.costLeft, c.method = MaxRequestSize-len(raw), wr.left, r.ServiceMethod
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		c.fail(fmt.Errorf("malformed request header: %w", err))
	}
	return err
}

// ReadRequestBody reads the body into body, a pointer, or discards it if
// body is nil. A body that would decode to more than the request's budget
// is refused with an error that wraps ErrTooLarge, and the codec stays in
// step; any other failure poisons it.
func (c *ServerCodec) ReadRequestBody(body any) error {
	raw, err := c.rd.next(c.bytesLeft)
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			err = fmt.Errorf("%s: %w", c.method, err)
			c.fail(fmt.Errorf("refusing request body: %w", err))
			return err
		}
		c.fail(fmt.Errorf("malformed request body: %w", err))
		return err
	}
	defer c.rd.release()
	if body == nil {
		return nil
	}
	if d, ok := body.(wireDecoder); ok {
		err := decodeWire(raw, d, c.costLeft)
		var over *overBudget
		switch {
		case errors.As(err, &over):
			return fmt.Errorf("%s: %w: %v", c.method, ErrTooLarge, over)
		case err != nil:
			c.fail(fmt.Errorf("malformed request body: %w", err))
		}
		return err
	}
	if _, err := checkDecodeCost(raw, typeOfPointee(body), c.costLeft); err != nil {
		var over *overBudget
		if errors.As(err, &over) {
			return fmt.Errorf("%s: %w: %v", c.method, ErrTooLarge, over)
		}
		c.fail(fmt.Errorf("malformed request body: %w", err))
		return err
	}
	if err := decodeBytes(raw, body); err != nil {
		c.fail(fmt.Errorf("malformed request body: %w", err))
		return err
	}
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
	if !appendFast(&w.b, header, body) {
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
