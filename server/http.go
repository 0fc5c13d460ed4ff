package server

import "context"

// Call answers an RPC method in process for a client of the HTTP API
// (SPEC §16), through the same capability check, authorizer, forwarding
// and handler as a request from the network (rpc.Server.Call). The HTTP
// API is served by the process that runs the server (package httpapi),
// never by dialling this server's own port.
func (s *Server) Call(ctx context.Context, method string, args, reply any) error {
	return s.rpcServer.Call(ctx, method, args, reply)
}
