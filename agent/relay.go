package agent

import (
	"context"

	"github.com/weft-sched/weft/internal/identity"
	wrpc "github.com/weft-sched/weft/rpc"
)

// A container reaches other agents through its own: with TLS on, an agent
// serves callers without a certificate only from its own host, where it
// can tell which app's account is calling (checkCaller). A container's
// call for another node names that node's address (the request's node),
// and its agent, having checked the caller as if the call were its own,
// relays it with its agent certificate; the agent there checks the token
// again. The relay dials only an agent: the pool verifies the far end's
// agent certificate, so it is no way for a container to reach anything
// else with the node's certificate.

// relayTarget reports whether a call naming node (an agent's RPC address;
// "" for this one) is for another agent, and refuses one that may not be
// relayed: an agent relays only its own host's callers' calls, never a
// peer's (no chains).
func (a *Agent) relayTarget(ctx context.Context, node string) (bool, error) {
	if node == "" || node == a.rpcAddr {
		return false, nil
	}
	if ci := wrpc.ConnInfoFrom(ctx); ci == nil || ci.Role != "" {
		return true, wrpc.Errorf(wrpc.CodeBadRequest, "node %s: an agent relays only the calls of containers on its own node", node)
	}
	return true, nil
}

// relay sends a call on to the agent at node, as this agent.
func (a *Agent) relay(ctx context.Context, node, method string, args, reply any) error {
	ctx, cancel := context.WithTimeout(ctx, relayTimeout)
	defer cancel()
	return a.agentPool.Call(ctx, node, method, args, reply)
}

// relayAMCall checks that the caller of a call for another node holds an
// AM token and runs as that app's account, then relays it.
func (e *containerEndpoint) relayAMCall(ctx context.Context, node, method, token string, args, reply any) error {
	claims, err := e.a.verifyToken(ctx, token)
	if err != nil {
		return denied("relaying %s to %s: AM token: %v", method, node, err)
	}
	if claims.Kind != identity.KindAM || claims.Minter != "" {
		return denied("relaying %s to %s needs its app's AM token", method, node)
	}
	if err := e.a.checkCaller(ctx, "app "+claims.AppID, claims.User, claims.UID); err != nil {
		return err
	}
	return e.a.relay(ctx, node, method, args, reply)
}

// relayStart checks a Container.Start for another node as that node will
// (a container token of exactly that container, and the account it runs as
// its app's) and that its caller runs as that account, then relays it.
func (e *containerEndpoint) relayStart(ctx context.Context, args *wrpc.ContainerStartRequest, reply *wrpc.ContainerStartResponse) error {
	c := &args.Container
	claims, err := e.a.verifyToken(ctx, args.Token)
	if err != nil {
		return denied("container %s: container token: %v", c.ID, err)
	}
	if claims.Kind != identity.KindContainer || claims.ContainerID != c.ID || claims.NodeID != c.NodeID || claims.AppID != c.AppID {
		return denied("container %s: the token is not a container token of it on node %s", c.ID, c.NodeID)
	}
	user, uid, err := e.a.accountOf(ctx, claims, args.AMToken)
	if err != nil {
		return err
	}
	if err := e.a.checkCaller(ctx, "container "+c.ID, user, uid); err != nil {
		return err
	}
	return e.a.relay(ctx, c.NodeAddress, "Container.Start", args, reply)
}
