package rpc

// Capability is what a method asks of its caller (SPEC §15). Every
// registered method declares one; the process's authorizer checks the
// method-wide part before the handler runs, and the handler checks what
// depends on the request (which queue, whose app, which container).
type Capability string

// Capabilities. Values appear in tests and docs, not on the wire.
const (
	// CapPublic: anyone who can reach the port (liveness, leader address,
	// the one-time ACL bootstrap).
	CapPublic Capability = "public"
	// CapOperatorRead / CapOperatorWrite: an ACL token with operator read
	// or write (cluster status, Raft peers, queue configuration, keyrings).
	CapOperatorRead  Capability = "operator:read"
	CapOperatorWrite Capability = "operator:write"
	// CapNodeRead / CapNodeWrite: an ACL token with node read or write.
	CapNodeRead  Capability = "node:read"
	CapNodeWrite Capability = "node:write"
	// CapQueueRead / CapQueueSubmit: an ACL token; the handler checks read
	// or submit on the queue concerned (lists show only readable queues).
	CapQueueRead   Capability = "queue:read"
	CapQueueSubmit Capability = "queue:submit"
	// CapACLRead / CapACLWrite: an ACL token with acl read or write.
	CapACLRead  Capability = "acl:read"
	CapACLWrite Capability = "acl:write"
	// CapToken: any valid ACL token (a token asking about itself).
	CapToken Capability = "token"
	// CapAgent: a peer with an agent certificate (when TLS is on), or a
	// server one (a follower forwarding an agent's call, checked where it
	// arrived); the handler checks the node's secret. The RPC server
	// checks the certificate before any authorizer runs.
	CapAgent Capability = "agent"
	// CapServer: a peer with a server certificate (when TLS is on),
	// checked by the RPC server before any authorizer runs.
	CapServer Capability = "server"
	// CapFederation: a peer with a server or a router certificate (when
	// TLS is on): a sub-cluster's leader reporting to the routers, a
	// router forwarding to its leader, routers checking each other.
	CapFederation Capability = "federation"
	// CapWorkload: an AM or container token in the request, which the
	// handler verifies (the AM protocol and container management).
	CapWorkload Capability = "workload"
)

// asksToken reports whether a capability is checked against a token the
// request carries: an ACL token, or a workload token (CapWorkload).
func (c Capability) asksToken() bool {
	switch c {
	case CapPublic, CapServer, CapAgent, CapFederation:
		return false
	}
	return true
}
