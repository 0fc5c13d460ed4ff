package agent

import (
	"fmt"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// amrmProxy is the AM protocol on the agent (SPEC §8): AMs on this node talk
// to it, and it relays their calls to the servers, riding out server
// failovers with the agent's retrying client.
type amrmProxy struct{ a *Agent }

// Register relays AM.Register.
func (p *amrmProxy) Register(args *wrpc.AMRegisterRequest, reply *wrpc.AMRegisterResponse) error {
	return p.a.client.Call("AM.Register", args, reply)
}

// Allocate relays AM.Allocate.
func (p *amrmProxy) Allocate(args *wrpc.AMAllocateRequest, reply *wrpc.AMAllocateResponse) error {
	return p.a.client.Call("AM.Allocate", args, reply)
}

// Finish relays AM.Finish.
func (p *amrmProxy) Finish(args *wrpc.AMFinishRequest, reply *wrpc.WriteResponse) error {
	return p.a.client.Call("AM.Finish", args, reply)
}

// containerEndpoint is the container-management protocol (SPEC §8).
type containerEndpoint struct{ a *Agent }

// Start runs a container placed on this node.
func (e *containerEndpoint) Start(args *wrpc.ContainerStartRequest, reply *wrpc.ContainerStartResponse) error {
	c := args.Container
	switch {
	case c.NodeID != e.a.config.NodeID:
		return fmt.Errorf("container %s is placed on node %s, not on %s", c.ID, c.NodeID, e.a.config.NodeID)
	case args.Token != c.ID:
		return fmt.Errorf("container %s: invalid container token", c.ID)
	case len(args.Launch.Command) == 0:
		return fmt.Errorf("container %s: launch command is empty", c.ID)
	case e.a.epoch.Load() == 0:
		return fmt.Errorf("node %s is not registered yet", e.a.config.NodeID)
	}
	*reply = *e.a.mgr.start(c, args.Launch)
	return nil
}

// Stop stops a container on this node.
func (e *containerEndpoint) Stop(args *wrpc.ContainerIDRequest, reply *struct{}) error {
	e.a.mgr.stop(args.ID, scheduler.ReasonKilled)
	return nil
}

// Status reports containers on this node (all of them if no IDs are given).
func (e *containerEndpoint) Status(args *wrpc.ContainerStatusRequest, reply *wrpc.ContainerStatusResponse) error {
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

// Logs reads a container's stdout or stderr.
func (e *containerEndpoint) Logs(args *wrpc.ContainerLogsRequest, reply *wrpc.ContainerLogsResponse) error {
	resp, err := e.a.mgr.logs(args)
	if err != nil {
		return err
	}
	*reply = *resp
	return nil
}
