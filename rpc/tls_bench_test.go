package rpc

import (
	"context"
	"net"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/internal/tlsutil"
)

// startBenchServer serves Echo on loopback, with TLS when tc is set.
func startBenchServer(b *testing.B, tc *tlsutil.Configurator) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	lis := NewListener(newRPCServer("bench", hclog.NewNullLogger()), hclog.NewNullLogger(), nil)
	if tc != nil {
		lis.UseTLS(tc, RequireClientCert)
	}
	go lis.Serve(ln)
	b.Cleanup(func() {
		ln.Close()
		lis.Close()
	})
	return ln.Addr().String()
}

// mtlsRounds is how many times the mTLS benchmarks alternate between TLS
// off and on, so that both see the same machine.
const mtlsRounds = 3

// BenchmarkCallMTLS is one small RPC on an open multiplexed session over
// loopback, in plaintext and inside mutual TLS: the per-call cost of TLS
// (record encryption both ways), without the handshake. The two servers
// run side by side and are measured in alternating rounds.
func BenchmarkCallMTLS(b *testing.B) {
	pki := testutil.NewPKI(b)
	modes := []struct {
		name string
		addr string
		pool *Pool
	}{
		{"tls-off", startBenchServer(b, nil), NewPool(nil)},
		{"tls-on", startBenchServer(b, pki.Configurator(RoleServer)), NewTLSPool(nil, pki.Configurator(RoleClient), RoleServer)},
	}
	args := &EchoArgs{Text: "hello", Blob: make([]byte, 256)}
	for _, m := range modes {
		defer m.pool.Shutdown()
		if err := m.pool.Call(context.Background(), m.addr, "Echo.Echo", args, &EchoReply{}); err != nil {
			b.Fatal(err)
		}
	}
	for round := 0; round < mtlsRounds; round++ {
		for _, m := range modes {
			b.Run(m.name, func(b *testing.B) {
				var reply EchoReply
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if err := m.pool.Call(context.Background(), m.addr, "Echo.Echo", args, &reply); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkConnectMTLS is a new connection and its first call: TCP, the
// TLS handshake (ECDSA P-256, both certificates verified) and yamux.
func BenchmarkConnectMTLS(b *testing.B) {
	pki := testutil.NewPKI(b)
	modes := []struct {
		name string
		addr string
		tc   *tlsutil.Configurator
	}{
		{"tls-off", startBenchServer(b, nil), nil},
		{"tls-on", startBenchServer(b, pki.Configurator(RoleServer)), pki.Configurator(RoleClient)},
	}
	args := &EchoArgs{Text: "hello"}
	for round := 0; round < mtlsRounds; round++ {
		for _, m := range modes {
			b.Run(m.name, func(b *testing.B) {
				var reply EchoReply
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					p := NewTLSPool(nil, m.tc, RoleServer)
					if err := p.Call(context.Background(), m.addr, "Echo.Echo", args, &reply); err != nil {
						b.Fatal(err)
					}
					p.Shutdown()
				}
			})
		}
	}
}
