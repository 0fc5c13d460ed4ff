package server

// Operator holds the server's own operator actions (the workload key,
// identity.go); those on Raft and the gossip pool, which routers share,
// are raftnode.Operator's.
type Operator struct{ srv *Server }
