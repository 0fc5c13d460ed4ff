package rpc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/rpc"
	"sync/atomic"

	"github.com/hashicorp/go-msgpack/v2/codec"
	msgpackrpc "github.com/hashicorp/net-rpc-msgpackrpc/v2"
)

// MaxRequestSize is the largest request (header and body) a server decodes.
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

// budgetReader counts down a per-request byte budget over a buffered reader.
type budgetReader struct {
	r         *bufio.Reader
	remaining int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if b.remaining <= 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.r.Read(p)
	b.remaining -= int64(n)
	return n, err
}

func (b *budgetReader) ReadByte() (byte, error) {
	if b.remaining <= 0 {
		return 0, ErrTooLarge
	}
	c, err := b.r.ReadByte()
	if err == nil {
		b.remaining--
	}
	return c, err
}

func (b *budgetReader) UnreadByte() error {
	err := b.r.UnreadByte()
	if err == nil {
		b.remaining++
	}
	return err
}

type readWriteCloser struct {
	io.Reader
	io.Writer
	io.Closer
}

// ServerCodec is the server side of msgpack RPC on one connection or stream.
// Every request gets a fresh MaxRequestSize budget. A request that cannot be
// decoded poisons the codec: net/rpc then closes the connection, because the
// stream can no longer be trusted to be in step.
type ServerCodec struct {
	rpc.ServerCodec
	budget *budgetReader
	broken atomic.Bool
	onErr  func(error)
}

// NewServerCodec returns a server codec over conn. onErr, if not nil, is told
// why a connection is being dropped (it is never told about a clean EOF).
func NewServerCodec(conn io.ReadWriteCloser, onErr func(error)) *ServerCodec {
	b := &budgetReader{r: bufio.NewReaderSize(conn, 64<<10)}
	inner := msgpackrpc.NewCodecFromHandle(false, true, readWriteCloser{b, conn, conn}, MsgpackHandle)
	return &ServerCodec{ServerCodec: inner, budget: b, onErr: onErr}
}

// ReadRequestHeader starts a new request budget and reads its header.
func (c *ServerCodec) ReadRequestHeader(r *rpc.Request) error {
	if c.broken.Load() {
		return errors.New("connection closed after a malformed request")
	}
	c.budget.remaining = MaxRequestSize
	err := c.ServerCodec.ReadRequestHeader(r)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		c.fail(fmt.Errorf("malformed request header: %w", err))
	}
	return err
}

// ReadRequestBody reads the body; a failure poisons the codec.
func (c *ServerCodec) ReadRequestBody(body any) error {
	err := c.ServerCodec.ReadRequestBody(body)
	if err != nil {
		c.broken.Store(true)
		if errors.Is(err, ErrTooLarge) {
			err = ErrTooLarge
		}
		c.fail(fmt.Errorf("malformed request body: %w", err))
	}
	return err
}

func (c *ServerCodec) fail(err error) {
	c.broken.Store(true)
	if c.onErr != nil {
		c.onErr(err)
	}
}

// NewClientCodec returns the client side of msgpack RPC over conn.
func NewClientCodec(conn io.ReadWriteCloser) rpc.ClientCodec {
	return msgpackrpc.NewCodecFromHandle(true, true, conn, MsgpackHandle)
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
