package agent

import "context"

// CallServers calls a method on the servers with the agent's own client
// (its certificate, server discovery and failover). The agent's HTTP API
// relays container-log reads through it: the agent holds no ACL state,
// so the servers check the caller's token, and they mint the container
// token the agent's RPC port asks for.
func (a *Agent) CallServers(ctx context.Context, method string, args, reply any) error {
	return a.client.Call(ctx, method, args, reply)
}
