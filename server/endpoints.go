package server

import (
	"github.com/weft-sched/weft/internal/raftnode"
	wrpc "github.com/weft-sched/weft/rpc"
)

// registerEndpoints exposes every RPC method. Each is named here once, so
// the list below is the server's whole RPC surface: with its capability,
// and for the few whose requests may be larger than wrpc.DefaultMaxBody,
// their bound (wrpc.MaxBody).
func (s *Server) registerEndpoints() {
	r := s.rpcServer
	status, op, queue := &Status{s}, &Operator{s}, &Queue{s}
	shared := &raftnode.Operator{Node: s.node, Meta: s.setMeta, Logger: s.logger, CallMember: s.callMember}
	node, app, ctr, am := &Node{s}, &App{s}, &Container{s}, &AM{s}

	wrpc.Register(r, "Status.Ping", wrpc.CapPublic, shared.Ping)
	wrpc.Register(r, "Status.Leader", wrpc.CapPublic, shared.Leader)
	wrpc.Register(r, "Status.Peers", wrpc.CapPublic, shared.Peers)
	wrpc.Register(r, "Status.Members", wrpc.CapOperatorRead, shared.Members)
	wrpc.Register(r, "Status.Cluster", wrpc.CapOperatorRead, status.Cluster)
	wrpc.Register(r, "Status.Raft", wrpc.CapOperatorRead, status.Raft)
	wrpc.Register(r, "Status.Self", wrpc.CapServer, shared.Self)
	wrpc.Register(r, "Status.AppliedIndex", wrpc.CapServer, status.AppliedIndex)

	wrpc.Register(r, "Operator.RaftGetConfiguration", wrpc.CapOperatorRead, shared.RaftGetConfiguration)
	wrpc.Register(r, "Operator.RaftRemovePeer", wrpc.CapOperatorWrite, shared.RaftRemovePeer)
	wrpc.Register(r, "Operator.Debug", wrpc.CapOperatorWrite, shared.Debug)
	wrpc.Register(r, "Operator.WorkloadKeyRotate", wrpc.CapOperatorWrite, op.WorkloadKeyRotate)
	wrpc.Register(r, "Operator.KeyringList", wrpc.CapOperatorWrite, shared.KeyringList)
	wrpc.Register(r, "Operator.KeyringInstall", wrpc.CapOperatorWrite, shared.KeyringInstall)
	wrpc.Register(r, "Operator.KeyringUse", wrpc.CapOperatorWrite, shared.KeyringUse)
	wrpc.Register(r, "Operator.KeyringRemove", wrpc.CapOperatorWrite, shared.KeyringRemove)
	wrpc.Register(r, "Gossip.Keyring", wrpc.CapServer, shared.KeyringMember)

	wrpc.Register(r, "Queue.Apply", wrpc.CapOperatorWrite, queue.Apply, wrpc.MaxBody(wrpc.MaxSpecBody))
	wrpc.Register(r, "Queue.List", wrpc.CapQueueRead, queue.List)
	wrpc.Register(r, "Queue.Status", wrpc.CapQueueRead, queue.Status)

	wrpc.Register(r, "Node.Register", wrpc.CapAgent, node.Register)
	wrpc.Register(r, "Node.Heartbeat", wrpc.CapAgent, node.Heartbeat, wrpc.MaxBody(wrpc.MaxRequestSize))
	wrpc.Register(r, "Node.HeartbeatBatch", wrpc.CapServer, node.HeartbeatBatch, wrpc.MaxBody(wrpc.MaxRequestSize))
	wrpc.Register(r, "Node.Deregister", wrpc.CapAgent, node.Deregister)
	wrpc.Register(r, "Node.ResetSecret", wrpc.CapNodeWrite, node.ResetSecret)
	wrpc.Register(r, "Node.JoinTokenCreate", wrpc.CapNodeWrite, node.JoinTokenCreate)
	wrpc.Register(r, "Node.Drain", wrpc.CapNodeWrite, node.Drain)
	wrpc.Register(r, "Node.List", wrpc.CapNodeRead, node.List)
	wrpc.Register(r, "Node.Status", wrpc.CapNodeRead, node.Status)
	wrpc.Register(r, "Node.Which", wrpc.CapFederation, node.Which, wrpc.MaxBody(wrpc.MaxListBody))

	wrpc.Register(r, "App.Submit", wrpc.CapQueueSubmit, app.Submit, wrpc.MaxBody(wrpc.MaxSpecBody))
	wrpc.Register(r, "App.List", wrpc.CapQueueRead, app.List)
	wrpc.Register(r, "App.Status", wrpc.CapQueueRead, app.Status)
	wrpc.Register(r, "App.Kill", wrpc.CapQueueSubmit, app.Kill)
	wrpc.Register(r, "App.SubmitUnmanaged", wrpc.CapFederation, app.SubmitUnmanaged)

	wrpc.Register(r, "Container.List", wrpc.CapQueueRead, ctr.List)
	wrpc.Register(r, "Container.Logs", wrpc.CapQueueRead, ctr.Logs)

	wrpc.Register(r, "AM.Register", wrpc.CapWorkload, am.Register)
	wrpc.Register(r, "AM.Allocate", wrpc.CapWorkload, am.Allocate, wrpc.MaxBody(wrpc.MaxRequestSize))
	wrpc.Register(r, "AM.Finish", wrpc.CapWorkload, am.Finish, wrpc.MaxBody(wrpc.MaxListBody))
	wrpc.Register(r, "AM.Verify", wrpc.CapFederation, am.Verify)

	acls := &ACL{s}
	wrpc.Register(r, "ACL.Bootstrap", wrpc.CapPublic, acls.Bootstrap)
	wrpc.Register(r, "ACL.TokenCreate", wrpc.CapACLWrite, acls.TokenCreate)
	wrpc.Register(r, "ACL.TokenList", wrpc.CapACLRead, acls.TokenList)
	wrpc.Register(r, "ACL.TokenInfo", wrpc.CapACLRead, acls.TokenInfo)
	wrpc.Register(r, "ACL.TokenSelf", wrpc.CapToken, acls.TokenSelf)
	wrpc.Register(r, "ACL.Authorize", wrpc.CapPublic, acls.Authorize)
	wrpc.Register(r, "ACL.TokenDelete", wrpc.CapACLWrite, acls.TokenDelete)
	wrpc.Register(r, "ACL.PolicyApply", wrpc.CapACLWrite, acls.PolicyApply, wrpc.MaxBody(wrpc.MaxListBody))
	wrpc.Register(r, "ACL.PolicyList", wrpc.CapACLRead, acls.PolicyList)
	wrpc.Register(r, "ACL.PolicyInfo", wrpc.CapACLRead, acls.PolicyInfo)
	wrpc.Register(r, "ACL.PolicyDelete", wrpc.CapACLWrite, acls.PolicyDelete)
}
