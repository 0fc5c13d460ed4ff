package server

// registerEndpoints exposes every RPC service. Each service type has only
// RPC methods, so net/rpc registers all of them.
func (s *Server) registerEndpoints() {
	must := func(err error) {
		if err != nil {
			panic("register RPC endpoint: " + err.Error())
		}
	}
	must(s.rpcServer.RegisterName("Status", &Status{s}))
	must(s.rpcServer.RegisterName("Operator", &Operator{s}))
	must(s.rpcServer.RegisterName("Queue", &Queue{s}))
	must(s.rpcServer.RegisterName("Node", &Node{s}))
	must(s.rpcServer.RegisterName("App", &App{s}))
	must(s.rpcServer.RegisterName("Container", &Container{s}))
	must(s.rpcServer.RegisterName("AM", &AM{s}))
}
