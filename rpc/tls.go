package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weft-sched/weft/internal/tlsutil"
)

// Role is what a peer's verified certificate lets it be (SPEC §15).
type Role = tlsutil.Role

// The certificate roles, as package tlsutil names them.
const (
	RoleServer = tlsutil.RoleServer
	RoleAgent  = tlsutil.RoleAgent
	RoleRouter = tlsutil.RoleRouter
	RoleClient = tlsutil.RoleClient
)

// ClientCerts says whether a TLS listener requires its peers to present a
// certificate.
type ClientCerts int

const (
	// RequireClientCert refuses a peer without a certificate the CA signed
	// for a role in this region: a server's port.
	RequireClientCert ClientCerts = iota
	// OptionalClientCert verifies a certificate that is presented and also
	// serves peers without one, which have no role: an agent's port, which
	// AMs in containers (who hold no certificate) reach. Endpoints there
	// must authorize such callers by other means (AM and container tokens).
	OptionalClientCert
	// LocalOptionalClientCert is OptionalClientCert for peers on this host
	// only: a peer without a certificate from another host is closed
	// after the handshake. An agent's port: its containers reach it from
	// its own host (and other nodes through it), so nobody elsewhere gets
	// past its handshake without a weft certificate.
	LocalOptionalClientCert
)

// listenerTLS is a listener's TLS setting.
type listenerTLS struct {
	conf   *tlsutil.Configurator
	config *tls.Config
	// localAnonymous serves peers without a certificate only from this
	// host (LocalOptionalClientCert).
	localAnonymous bool
}

// UseTLS makes l accept only TLS connections (first byte ConnTLS, then a
// TLS handshake, then the inner type byte), verified with tc: a
// plaintext connection is closed with a logged reason, Raft is served only
// to a peer holding a server certificate, and every request carries the
// peer's verified identity in its ConnInfo. Call it before Serve. Without
// it (or with tc nil), a listener refuses ConnTLS.
func (l *Listener) UseTLS(tc *tlsutil.Configurator, certs ClientCerts) {
	if tc == nil {
		l.tls = nil
		return
	}
	config := tc.IncomingConfig()
	if certs == OptionalClientCert || certs == LocalOptionalClientCert {
		config = tc.IncomingConfigCertOptional()
	}
	l.tls = &listenerTLS{conf: tc, config: config, localAnonymous: certs == LocalOptionalClientCert}
}

// unwrapTLS checks a new connection's first byte t against the listener's
// TLS setting and, for ConnTLS, completes the TLS handshake and reads the
// inner type byte, all before deadline. It returns the connection to serve
// (the TLS one), its inner type and its peer's identity.
func (l *Listener) unwrapTLS(raw net.Conn, t ConnType, deadline time.Time) (net.Conn, ConnType, *ConnInfo, error) {
	info := &ConnInfo{RemoteAddr: raw.RemoteAddr(), LocalAddr: raw.LocalAddr(), peer: &peerUID{}}
	switch {
	case l.tls == nil && t == ConnTLS:
		return nil, 0, nil, errors.New("TLS connection refused: TLS is not configured on this listener")
	case l.tls == nil:
		return raw, t, info, nil
	case t != ConnTLS:
		return nil, 0, nil, fmt.Errorf("plaintext connection (type byte %#x) refused: this listener requires TLS", byte(t))
	}
	conn := tls.Server(raw, l.tls.config)
	conn.SetDeadline(deadline)
	ctx, cancel := context.WithDeadline(l.ctx, deadline)
	defer cancel()
	if err := conn.HandshakeContext(ctx); err != nil {
		return nil, 0, nil, fmt.Errorf("TLS handshake: %w", err)
	}
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return nil, 0, nil, fmt.Errorf("no type byte after the TLS handshake: %w", err)
	}
	// The read deadline stays until a whole request has arrived (limits.go).
	conn.SetWriteDeadline(time.Time{})
	cs := conn.ConnectionState()
	info.TLS = true
	info.Role, _ = l.tls.conf.PeerRole(cs)
	if l.tls.localAnonymous && len(cs.PeerCertificates) == 0 && !IsLocalAddr(raw.RemoteAddr()) {
		return nil, 0, nil, errors.New("a peer without a certificate is served only from this host")
	}
	if len(cs.PeerCertificates) > 0 {
		info.CommonName = cs.PeerCertificates[0].Subject.CommonName
	}
	inner := ConnType(b[0])
	switch {
	case inner == ConnTLS:
		return nil, 0, nil, errors.New("TLS inside TLS refused")
	case inner == ConnRaft && info.Role != l.raftRole:
		return nil, 0, nil, fmt.Errorf("Raft refused: only a %s certificate may open Raft; the peer holds %s", l.raftRole, describeRole(info))
	}
	return conn, inner, info, nil
}

// describeRole names a peer's certificate for logs and errors.
func describeRole(info *ConnInfo) string {
	switch {
	case info.Role != "":
		return fmt.Sprintf("a %s certificate (%s)", info.Role, info.CommonName)
	case info.CommonName != "":
		return fmt.Sprintf("a certificate with no role here (%s)", info.CommonName)
	}
	return "no certificate"
}

// ClientHandshake opens a connection of type inner on conn, which was just
// dialed: with tc set, it writes ConnTLS, runs the TLS handshake
// (verifying that the peer holds role peer, and presenting this process's
// certificate), and writes inner over TLS; without, it writes inner. It
// returns the connection to use (the TLS one with tc set) and closes conn
// on failure. The handshake ends by ctx's deadline, or fails when ctx ends.
func ClientHandshake(ctx context.Context, conn net.Conn, tc *tlsutil.Configurator, peer Role, inner ConnType) (net.Conn, error) {
	return clientHandshake(ctx, conn, tc, []Role{peer}, inner)
}

// clientHandshake is ClientHandshake to a peer holding any of peers.
func clientHandshake(ctx context.Context, conn net.Conn, tc *tlsutil.Configurator, peers []Role, inner ConnType) (net.Conn, error) {
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	fail := func(err error) (net.Conn, error) {
		conn.Close()
		return nil, err
	}
	if tc == nil {
		if _, err := conn.Write([]byte{byte(inner)}); err != nil {
			return fail(err)
		}
		conn.SetDeadline(time.Time{})
		return conn, nil
	}
	if _, err := conn.Write([]byte{byte(ConnTLS)}); err != nil {
		return fail(err)
	}
	tlsConn := tls.Client(conn, tc.OutgoingConfig(peers[0], peers[1:]...))
	if err := tlsConn.HandshakeContext(ctx); err != nil {
		names := make([]string, len(peers))
		for i, p := range peers {
			names[i] = string(p)
		}
		return fail(fmt.Errorf("TLS handshake (the peer must hold a %s certificate): %w", strings.Join(names, " or "), err))
	}
	if _, err := tlsConn.Write([]byte{byte(inner)}); err != nil {
		return fail(err)
	}
	tlsConn.SetDeadline(time.Time{})
	return tlsConn, nil
}

// requireCapabilityRole checks the certificate role that capability c
// asks of the caller, before any authorizer or handler runs: CapServer
// needs a server certificate, CapAgent an agent one or a server one (a
// server forwarding an agent's call to the leader, having checked it
// where the call arrived; a server certificate is trusted with Raft
// itself). Other capabilities ask no role. Like RequireRole, it passes
// without TLS and for calls made in process, except that a request from
// an HTTP client (ConnInfo.HTTP) is refused every method whose capability
// asks a certificate role or a workload token.
func requireCapabilityRole(ctx context.Context, c Capability) error {
	if ci := ConnInfoFrom(ctx); ci != nil && ci.HTTP {
		switch c {
		case CapServer, CapAgent, CapWorkload, CapFederation:
			return Errorf(CodePermissionDenied, "%w: this call is for %s peers of the RPC port, not for HTTP clients",
				ErrPermissionDenied, c)
		}
	}
	switch c {
	case CapServer:
		return RequireRole(ctx, RoleServer)
	case CapFederation:
		return RequireRole(ctx, RoleServer, RoleRouter)
	case CapAgent:
		return RequireRole(ctx, RoleAgent, RoleServer)
	}
	return nil
}

// RequireRole checks that the caller of the request in ctx presented a
// certificate holding one of roles. It passes for a call made in process
// (no ConnInfo) and for a connection without TLS (TLS off: roles are not
// known, and other settings guard the port). Otherwise it fails with a
// CodePermissionDenied error that names what was needed.
func RequireRole(ctx context.Context, roles ...Role) error {
	ci := ConnInfoFrom(ctx)
	if ci == nil || !ci.TLS || (ci.Role != "" && slices.Contains(roles, ci.Role)) {
		return nil
	}
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	return Errorf(CodePermissionDenied, "%w: this call needs a certificate of role %s; the caller presented %s",
		ErrPermissionDenied, strings.Join(names, " or "), describeRole(ci))
}

// IsLocalAddr reports whether a is an address of this host: loopback, or
// one of its interfaces' (looked up at most every localAddrsTTL).
func IsLocalAddr(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	if tcp.IP.IsLoopback() {
		return true
	}
	return localAddrs.has(tcp.IP)
}

// localAddrsTTL is how long the host's interface addresses are trusted.
const localAddrsTTL = 10 * time.Second

var localAddrs hostAddrs

// hostAddrs caches this host's interface addresses.
type hostAddrs struct {
	mu  sync.Mutex
	at  time.Time
	ips []net.IP
}

func (h *hostAddrs) has(ip net.IP) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.at) > localAddrsTTL {
		h.ips = h.ips[:0]
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					h.ips = append(h.ips, n.IP)
				}
			}
		}
		h.at = time.Now()
	}
	return slices.ContainsFunc(h.ips, ip.Equal)
}
