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

// MaxResponseSize bounds one response (header or body) on the wire as a
// client reads it: far above any answer weft gives (a list of every node
// of a large cluster is a few MiB), it only stops a broken peer from
// making a client buffer without end.
const MaxResponseSize = 1 << 30

// clientCodec is the client side of msgpack RPC on one connection or
// stream, with the wire format of net-rpc-msgpackrpc (a request header
// then its body, each one msgpack value; the same for responses). Unlike
// that codec it holds no buffer while idle: a request is encoded into a
// pooled buffer and written at once, and a response is read into a pooled
// buffer (msgReader) that goes back to the pool once its body is decoded.
// A stream kept idle in a Pool therefore costs no buffer memory, and a new
// stream allocates none.
type clientCodec struct {
	conn io.ReadWriteCloser
	rd   msgReader
	wmu  sync.Mutex
	// closed is set by Close; reads and writes after it fail with io.EOF.
	mu     sync.Mutex
	closed bool
}

// NewClientCodec returns the client side of msgpack RPC over conn.
func NewClientCodec(conn io.ReadWriteCloser) rpc.ClientCodec {
	return &clientCodec{conn: conn, rd: msgReader{r: conn}}
}

// WriteRequest writes a request header and body in one write.
func (c *clientCodec) WriteRequest(r *rpc.Request, body any) error {
	return writeMessage(&c.wmu, c.conn, r, body)
}

// ReadResponseHeader reads the next response's header.
func (c *clientCodec) ReadResponseHeader(r *rpc.Response) error {
	raw, err := c.rd.next(MaxResponseSize)
	if err != nil {
		return err
	}
	*r = rpc.Response{}
	wr := newWireReader(raw, MaxResponseSize)
	if err := decodeResponseHeader(&wr, r); err != nil {
		return err
	}
	if wr.pos != len(raw) {
		return fmt.Errorf("%d bytes after the response header", len(raw)-wr.pos)
	}
	return nil
}

// ReadResponseBody decodes the response body into body, or skips it if
// body is nil, then lets go of the read buffer if nothing more is in it.
func (c *clientCodec) ReadResponseBody(body any) error {
	raw, err := c.rd.next(MaxResponseSize)
	defer c.rd.release()
	if err != nil || body == nil {
		return err
	}
	if d, ok := body.(wireDecoder); ok {
		return decodeWire(raw, d, MaxResponseSize)
	}
	return decodeResponse(raw, body)
}

// Close closes the connection. A read buffer in use then is left to the
// garbage collector, never given back: the reader may still hold it.
func (c *clientCodec) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	return c.conn.Close()
}

// responseDecoders decode responses with MsgpackHandle, the handle the
// client codec always used: a response is not budget-checked, so it gets
// the handle whose collections grow only as elements arrive.
var responseDecoders = sync.Pool{New: func() any { return codec.NewDecoderBytes(nil, MsgpackHandle) }}

// decodeResponse decodes raw into out. Strings and byte slices are
// copies: raw may be reused afterwards.
func decodeResponse(raw []byte, out any) error {
	d := responseDecoders.Get().(*codec.Decoder)
	d.ResetBytes(raw)
	err := d.Decode(out)
	d.ResetBytes(nil)
	responseDecoders.Put(d)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF // raw is one whole value: EOF inside it is a short value
	}
	return err
}

// clientCall holds the headers of one call made with callWithCodec,
// pooled so that a call's headers cost no allocation.
type clientCall struct {
	req  rpc.Request
	resp rpc.Response
}

var clientCalls = sync.Pool{New: func() any { return new(clientCall) }}

var nextCallSeq atomic.Uint64

// callWithCodec makes one call on cc and waits for its answer, as
// net-rpc-msgpackrpc's CallWithCodec does (the same messages on the
// wire): a server's error answer is an rpc.ServerError; failing to write
// the request or read the answer is returned as it is.
func callWithCodec(cc rpc.ClientCodec, method string, args, reply any) error {
	c := clientCalls.Get().(*clientCall)
	defer func() {
		*c = clientCall{}
		clientCalls.Put(c)
	}()
	c.req = rpc.Request{ServiceMethod: method, Seq: nextCallSeq.Add(1)}
	if err := cc.WriteRequest(&c.req, args); err != nil {
		return err
	}
	if err := cc.ReadResponseHeader(&c.resp); err != nil {
		return err
	}
	if c.resp.Error != "" {
		if err := cc.ReadResponseBody(nil); err != nil {
			return err
		}
		return rpc.ServerError(c.resp.Error)
	}
	return cc.ReadResponseBody(reply)
}
