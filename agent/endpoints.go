package agent

import (
	"context"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// registerEndpoints returns the agent's RPC server: the AM protocol (the
// AMRMProxy), container management and the node's own load. Each method is
// named here once, so this is the agent's whole RPC surface.
func (a *Agent) registerEndpoints() *wrpc.Server {
	s := wrpc.NewServer(a.logger.Named("rpc"))
	c, ag := &containerEndpoint{a}, &agentEndpoint{a}
	wrpc.Register(s, "AM.Register", wrpc.CapWorkload, a.proxy.Register)
	wrpc.Register(s, "AM.Allocate", wrpc.CapWorkload, a.proxy.Allocate)
	wrpc.Register(s, "AM.Finish", wrpc.CapWorkload, a.proxy.Finish)
	wrpc.Register(s, "Container.Start", wrpc.CapWorkload, c.Start)
	wrpc.Register(s, "Container.Stop", wrpc.CapWorkload, c.Stop)
	wrpc.Register(s, "Container.Promote", wrpc.CapServer, c.Promote)
	wrpc.Register(s, "Container.Status", wrpc.CapWorkload, c.Status)
	wrpc.Register(s, "Container.Logs", wrpc.CapServer, c.Logs)
	wrpc.Register(s, "Agent.Load", wrpc.CapAgent, ag.Load)
	return s
}

// containerEndpoint is the container-management protocol (SPEC §8).
type containerEndpoint struct{ a *Agent }

// Start runs a container placed on this node.
func (e *containerEndpoint) Start(ctx context.Context, args *wrpc.ContainerStartRequest, reply *wrpc.ContainerStartResponse) error {
	c := args.Container
	if err := checkContainerIDs(&c); err != nil {
		return err
	}
	switch {
	case c.NodeID != e.a.config.NodeID:
		return wrpc.Errorf(wrpc.CodeBadRequest, "container %s is placed on node %s, not on %s", c.ID, c.NodeID, e.a.config.NodeID)
	case args.Token != c.ID:
		return wrpc.Errorf(wrpc.CodeBadRequest, "container %s: invalid container token", c.ID)
	case len(args.Launch.Command) == 0:
		return wrpc.Errorf(wrpc.CodeBadRequest, "container %s: launch command is empty", c.ID)
	case scheduler.ValidateContainerResources(c.Resources) != nil:
		return wrpc.Errorf(wrpc.CodeBadRequest, "container %s: %v", c.ID, scheduler.ValidateContainerResources(c.Resources))
	case c.ExecutionType != "" && !scheduler.ExecutionType(c.ExecutionType).Valid():
		return wrpc.Errorf(wrpc.CodeBadRequest, "container %s: execution_type must be GUARANTEED or OPPORTUNISTIC, not %q", c.ID, c.ExecutionType)
	case e.a.epoch.Load() == 0:
		return wrpc.Errorf(wrpc.CodeUnavailable, "node %s is not registered yet", e.a.config.NodeID)
	}
	// AM containers are launched by the agent itself, on the leader's
	// order: a client cannot claim one (and with it an AM's identity).
	// c.User, the account it may run as, comes from the servers through
	// the AM (see rpc.ContainerInfo.User).
	c.IsAM = false
	*reply = *e.a.mgr.start(c, args.Launch)
	return nil
}

// Stop stops a container on this node.
func (e *containerEndpoint) Stop(ctx context.Context, args *wrpc.ContainerIDRequest, reply *struct{}) error {
	if err := checkID("id", args.ID); err != nil {
		return err
	}
	e.a.mgr.stop(args.ID, scheduler.ReasonKilled)
	return nil
}

// Promote tells the agent that a container was promoted to guaranteed:
// it is no longer evicted for guaranteed arrivals. The leader calls it
// after recording the promotion; heartbeats repeat it until the agent
// reports the container guaranteed, and undo a promotion the servers do
// not hold.
func (e *containerEndpoint) Promote(ctx context.Context, args *wrpc.ContainerIDRequest, reply *struct{}) error {
	if err := checkID("id", args.ID); err != nil {
		return err
	}
	if !e.a.mgr.promote(args.ID) {
		return wrpc.Errorf(wrpc.CodeConflict, "container %s is not running opportunistic on node %s", args.ID, e.a.config.NodeID)
	}
	return nil
}

// Status reports containers on this node (all of them if no IDs are given).
func (e *containerEndpoint) Status(ctx context.Context, args *wrpc.ContainerStatusRequest, reply *wrpc.ContainerStatusResponse) error {
	if err := checkIDs("ids", args.IDs); err != nil {
		return err
	}
	want := map[string]bool{}
	for _, id := range args.IDs {
		want[id] = true
	}
	for _, r := range e.a.mgr.reports() {
		if len(want) == 0 || want[r.ID] {
			reply.Containers = append(reply.Containers, r)
		}
	}
	return nil
}

// Logs reads a container's stdout or stderr. The ID is exact: it matches
// one container or none.
func (e *containerEndpoint) Logs(ctx context.Context, args *wrpc.ContainerLogsRequest, reply *wrpc.ContainerLogsResponse) error {
	if err := checkLogsRequest(args); err != nil {
		return err
	}
	resp, err := e.a.mgr.logs(args)
	if err != nil {
		return err
	}
	*reply = *resp
	return nil
}

// agentEndpoint answers questions about the node itself.
type agentEndpoint struct{ a *Agent }

// Load reports the node's capacity and load, for the distributed
// schedulers of other agents that have had no list from the leader for a
// while.
func (e *agentEndpoint) Load(ctx context.Context, args *wrpc.RequestHeader, reply *wrpc.AgentLoadResponse) error {
	*reply = e.a.loadResponse()
	return nil
}
