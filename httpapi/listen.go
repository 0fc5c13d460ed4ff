package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/tlsutil"
)

// Server timeouts: a client has ReadHeaderTimeout to finish the TLS
// handshake and send a request's headers and BodyTimeout its body (set
// per request, where the body is read: a server-wide read timeout would
// also end blocking queries, whose connection then sits unread); an idle
// keep-alive connection is closed after IdleTimeout. Answers are bounded
// per request (blocking queries, followed logs).
const (
	ReadHeaderTimeout = 10 * time.Second
	BodyTimeout       = time.Minute
	IdleTimeout       = 2 * time.Minute
	MaxHeaderBytes    = 16 << 10
)

// What one HTTP/2 connection may hold before its requests' tokens are
// checked: MaxStreamsPerConn requests at once (each with at most
// MaxHeaderBytes of headers), and receiveWindow bytes of bodies nobody
// has read yet, per connection as per request.
const (
	MaxStreamsPerConn = 32
	receiveWindow     = 64 << 10
)

// Listener serves an HTTP API on one address.
type Listener struct {
	srv    *http.Server
	ln     net.Listener
	scheme string
	done   chan struct{}
}

// Listen serves h on addr ("IP:port"; port 0 picks a free one), over
// HTTPS with tc's certificate when tc is not nil. Browsers hold no
// certificate, so none is asked of clients: the ACL token protects the
// API. Of limits it takes MaxConnsPerSource: a source holding that many
// connections has more closed as soon as they are accepted.
func Listen(addr string, h http.Handler, tc *tlsutil.Configurator, limits Limits, logger hclog.Logger) (*Listener, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for HTTP on %s: %w", addr, err)
	}
	l := &Listener{ln: newSourceLimit(ln, limits.withDefaults().MaxConnsPerSource), scheme: "http", done: make(chan struct{})}
	l.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          MaxStreamsPerConn,
			MaxReceiveBufferPerConnection: receiveWindow,
			MaxReceiveBufferPerStream:     receiveWindow,
		},
		ErrorLog: logger.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}),
	}
	if tc != nil {
		l.scheme = "https"
		l.srv.TLSConfig = serverTLS(tc)
	}
	go func() {
		defer close(l.done)
		var err error
		if tc != nil {
			err = l.srv.ServeTLS(l.ln, "", "")
		} else {
			err = l.srv.Serve(l.ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("HTTP API stopped", "error", err)
		}
	}()
	return l, nil
}

// serverTLS serves tc's certificate (reloaded with it) and asks no client
// certificate.
func serverTLS(tc *tlsutil.Configurator) *tls.Config {
	base := tc.IncomingConfigCertOptional()
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := base.GetConfigForClient(hello)
			if err != nil || c == nil {
				return c, err
			}
			c = c.Clone()
			c.ClientAuth, c.ClientCAs, c.VerifyConnection = tls.NoClientCert, nil, nil
			c.NextProtos = []string{"h2", "http/1.1"}
			return c, nil
		},
	}
}

// Addr is the address the API listens on.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// URL is the API's base URL, e.g. https://127.0.0.1:8088.
func (l *Listener) URL() string { return l.scheme + "://" + l.Addr() }

// Close stops serving: open requests (blocking queries, followed logs)
// get a moment to end, then their connections close.
func (l *Listener) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := l.srv.Shutdown(ctx)
	if err != nil {
		err = l.srv.Close()
	}
	<-l.done
	return err
}

// sourceLimit is a listener that holds at most max connections of one
// source open: more are closed as soon as they are accepted, before a
// byte of them is read.
type sourceLimit struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[source]int
}

func newSourceLimit(ln net.Listener, max int) *sourceLimit {
	return &sourceLimit{Listener: ln, max: max, open: map[source]int{}}
}

// Accept returns the next connection of a source under its limit.
func (l *sourceLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := sourceOf(c.RemoteAddr().String())
		l.mu.Lock()
		if l.open[src] >= l.max {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.open[src]++
		l.mu.Unlock()
		return &sourceConn{Conn: c, release: sync.OnceFunc(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[src]--; l.open[src] == 0 {
				delete(l.open, src)
			}
		})}, nil
	}
}

// sourceConn is a connection sourceLimit counts until it is closed.
type sourceConn struct {
	net.Conn
	release func()
}

func (c *sourceConn) Close() error {
	c.release()
	return c.Conn.Close()
}
