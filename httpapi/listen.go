package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/tlsutil"
)

// Server timeouts: a client has this long to send its request's headers
// and body; an idle keep-alive connection is closed after IdleTimeout.
// Answers are bounded per request (blocking queries, followed logs).
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = time.Minute
	IdleTimeout       = 2 * time.Minute
	MaxHeaderBytes    = 64 << 10
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
// API.
func Listen(addr string, h http.Handler, tc *tlsutil.Configurator, logger hclog.Logger) (*Listener, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for HTTP on %s: %w", addr, err)
	}
	l := &Listener{ln: ln, scheme: "http", done: make(chan struct{})}
	l.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          logger.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}),
	}
	if tc != nil {
		l.scheme = "https"
		l.srv.TLSConfig = serverTLS(tc)
	}
	go func() {
		defer close(l.done)
		var err error
		if tc != nil {
			err = l.srv.ServeTLS(ln, "", "")
		} else {
			err = l.srv.Serve(ln)
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
