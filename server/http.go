package server

import (
	"context"

	wrpc "github.com/weft-sched/weft/rpc"
)

// Call answers an RPC method in process for a client of the HTTP API
// (SPEC §16), through the same capability check, authorizer, forwarding
// and handler as a request from the network (rpc.Server.Call). The HTTP
// API is served by the process that runs the server (package httpapi),
// never by dialling this server's own port.
func (s *Server) Call(ctx context.Context, method string, args, reply any) error {
	return s.rpcServer.Call(ctx, method, args, reply)
}

// Capabilities returns the capability every RPC method declares (for the
// HTTP API's check that each route asks what its method asks).
func (s *Server) Capabilities() map[string]wrpc.Capability {
	return s.rpcServer.Capabilities()
}
