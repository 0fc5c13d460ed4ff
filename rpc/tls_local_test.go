package rpc

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/testutil"
)

// farListener hands out connections that say they come from far away
// (another host), whatever their real peer.
type farListener struct{ net.Listener }

func (l farListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return farConn{c}, nil
}

type farConn struct{ net.Conn }

func (farConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 40000} }

// An agent's port (LocalOptionalClientCert) serves a peer without a
// certificate only from its own host: from elsewhere, only holders of a
// weft certificate get past its handshake.
func TestAgentPortServesAnonymousPeersOnlyFromItsHost(t *testing.T) {
	pki := testutil.NewPKI(t)
	serve := func(far bool) string {
		logger, _ := testutil.Logger(t, hclog.Debug)
		s := NewServer(logger)
		Register(s, "Test.Who", CapPublic, func(ctx context.Context, args *RequestHeader, reply *WhoReply) error {
			if ci := ConnInfoFrom(ctx); ci != nil {
				reply.TLS, reply.Role = ci.TLS, string(ci.Role)
			}
			return nil
		})
		lis := NewListener(s, logger, nil)
		lis.UseTLS(pki.Configurator(RoleAgent), LocalOptionalClientCert)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var served net.Listener = ln
		if far {
			served = farListener{ln}
		}
		go lis.Serve(served)
		t.Cleanup(func() { ln.Close(); lis.Close() })
		return ln.Addr().String()
	}
	near, far := serve(false), serve(true)
	call := func(certified bool, addr string) (WhoReply, error) {
		t.Helper()
		p := NewTLSPool(nil, pki.Anonymous(), RoleAgent)
		if certified {
			p = NewTLSPool(nil, pki.Configurator(RoleAgent), RoleAgent)
		}
		defer p.Shutdown()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var reply WhoReply
		err := p.Call(ctx, addr, "Test.Who", &RequestHeader{}, &reply)
		return reply, err
	}
	if got, err := call(false, near); err != nil || !got.TLS || got.Role != "" {
		t.Fatalf("a peer without a certificate from this host: %+v, %v", got, err)
	}
	if _, err := call(false, far); err == nil {
		t.Fatal("a peer without a certificate from another host was served")
	}
	if got, err := call(true, far); err != nil || got.Role != "agent" {
		t.Fatalf("an agent from another host: %+v, %v", got, err)
	}
	if !IsLocalAddr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 9)}) || IsLocalAddr(farConn{}.RemoteAddr()) {
		t.Fatal("IsLocalAddr is wrong")
	}
	if ifs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ifs {
			if n, ok := a.(*net.IPNet); ok && !IsLocalAddr(&net.TCPAddr{IP: n.IP}) {
				t.Fatalf("this host's address %s is not local", n.IP)
			}
		}
	}
}
