package server

import wrpc "github.com/weft-sched/weft/rpc"

// registerEndpoints exposes every RPC method. Each is named here once, so
// the list below is the server's whole RPC surface.
func (s *Server) registerEndpoints() {
	r := s.rpcServer
	status, op, queue := &Status{s}, &Operator{s}, &Queue{s}
	node, app, ctr, am := &Node{s}, &App{s}, &Container{s}, &AM{s}

	wrpc.Register(r, "Status.Ping", status.Ping)
	wrpc.Register(r, "Status.Leader", status.Leader)
	wrpc.Register(r, "Status.Peers", status.Peers)
	wrpc.Register(r, "Status.Members", status.Members)
	wrpc.Register(r, "Status.Cluster", status.Cluster)
	wrpc.Register(r, "Status.Raft", status.Raft)

	wrpc.Register(r, "Operator.RaftGetConfiguration", op.RaftGetConfiguration)
	wrpc.Register(r, "Operator.RaftRemovePeer", op.RaftRemovePeer)
	wrpc.Register(r, "Operator.KeyringList", op.KeyringList)
	wrpc.Register(r, "Operator.KeyringInstall", op.KeyringInstall)
	wrpc.Register(r, "Operator.KeyringUse", op.KeyringUse)
	wrpc.Register(r, "Operator.KeyringRemove", op.KeyringRemove)

	wrpc.Register(r, "Queue.Apply", queue.Apply)
	wrpc.Register(r, "Queue.List", queue.List)
	wrpc.Register(r, "Queue.Status", queue.Status)

	wrpc.Register(r, "Node.Register", node.Register)
	wrpc.Register(r, "Node.Heartbeat", node.Heartbeat)
	wrpc.Register(r, "Node.Deregister", node.Deregister)
	wrpc.Register(r, "Node.List", node.List)
	wrpc.Register(r, "Node.Status", node.Status)

	wrpc.Register(r, "App.Submit", app.Submit)
	wrpc.Register(r, "App.List", app.List)
	wrpc.Register(r, "App.Status", app.Status)
	wrpc.Register(r, "App.Kill", app.Kill)

	wrpc.Register(r, "Container.List", ctr.List)
	wrpc.Register(r, "Container.Logs", ctr.Logs)

	wrpc.Register(r, "AM.Register", am.Register)
	wrpc.Register(r, "AM.Allocate", am.Allocate)
	wrpc.Register(r, "AM.Finish", am.Finish)
}
