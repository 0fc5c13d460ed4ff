package agent

import (
	"context"
	"strings"

	"github.com/weft-sched/weft/internal/identity"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// registerEndpoints returns the agent's RPC server: the AM protocol (the
// AMRMProxy), container management, the node's own load and its gossip
// keyring (Gossip.Keyring, for the servers alone: how an operator's
// `weft operator gossip keyring` reaches the agent). Each method is
// named here once, so this is the agent's whole RPC surface. Every method
// but Agent.Load needs a workload token (SPEC §15): AM.* the AM token of an
// AM running here, Container.Start a container token of exactly that
// container on this node, Container.Stop/Status/Logs an AM token of the
// container's app (Logs also a container token of it, which servers mint
// to relay reads), Container.Output (a completed container's files, for
// the reduce tasks of a MapReduce job) the AM token of the container's
// app only, Container.Promote a container token of it as guaranteed (only
// the leader mints one). The token is checked before a request's body is
// read too (authorizeHeader), when the caller's header carries it.
func (a *Agent) registerEndpoints() *wrpc.Server {
	s := wrpc.NewServer(a.logger.Named("rpc"))
	c, ag := &containerEndpoint{a}, &agentEndpoint{a}
	wrpc.Register(s, "AM.Register", wrpc.CapWorkload, a.proxy.Register)
	wrpc.Register(s, "AM.Allocate", wrpc.CapWorkload, a.proxy.Allocate, wrpc.MaxBody(wrpc.MaxRequestSize))
	wrpc.Register(s, "AM.Finish", wrpc.CapWorkload, a.proxy.Finish, wrpc.MaxBody(wrpc.MaxListBody))
	wrpc.Register(s, "Container.Start", wrpc.CapWorkload, c.Start, wrpc.MaxBody(wrpc.MaxListBody))
	wrpc.Register(s, "Container.Stop", wrpc.CapWorkload, c.Stop)
	wrpc.Register(s, "Container.Promote", wrpc.CapWorkload, c.Promote)
	wrpc.Register(s, "Container.Status", wrpc.CapWorkload, c.Status, wrpc.MaxBody(wrpc.MaxListBody))
	wrpc.Register(s, "Container.Logs", wrpc.CapWorkload, c.Logs)
	wrpc.Register(s, "Container.Output", wrpc.CapWorkload, c.Output)
	wrpc.Register(s, "Agent.Load", wrpc.CapAgent, ag.Load)
	wrpc.Register(s, "Gossip.Keyring", wrpc.CapServer, ag.GossipKeyring)
	s.AuthorizeHeader = a.authorizeHeader
	return s
}

// authorizeHeader checks the workload token a request's header carries
// before its body is read (wrpc.Server.AuthorizeHeader): it must be valid
// here (signed by a workload key the agent holds, not expired). What it
// allows is the handler's to check, with the body.
func (a *Agent) authorizeHeader(ctx context.Context, method string, c wrpc.Capability, token string) (context.Context, error) {
	if _, err := a.verifyToken(ctx, token); err != nil {
		return ctx, denied("%s: workload token: %v", method, err)
	}
	return ctx, nil
}

// containerEndpoint is the container-management protocol (SPEC §8).
type containerEndpoint struct{ a *Agent }

// Start runs a container placed on this node, as its container token
// says it was allocated. A token starts its container once.
func (e *containerEndpoint) Start(ctx context.Context, args *wrpc.ContainerStartRequest, reply *wrpc.ContainerStartResponse) error {
	err := e.start(ctx, args, reply)
	// A node that turns away a container this agent's AMRMProxy allocated
	// gets nothing more from it until its next list (SPEC §21): the answer
	// says its queue is full.
	if c := &args.Container; err == nil && reply.State == string(scheduler.ContainerCompleted) && reply.Reason == string(scheduler.ReasonRejected) &&
		strings.HasPrefix(c.ID, scheduler.AgentContainerIDPrefix+e.a.config.NodeID+"-") {
		e.a.sched.turnedAway(c.NodeID)
	}
	return err
}

func (e *containerEndpoint) start(ctx context.Context, args *wrpc.ContainerStartRequest, reply *wrpc.ContainerStartResponse) error {
	c := args.Container
	if err := checkContainerIDs(&c); err != nil {
		return err
	}
	if c.NodeID != e.a.config.NodeID {
		if relay, err := e.a.relayTarget(ctx, c.NodeAddress); relay {
			if err == nil {
				err = e.relayStart(ctx, args, reply)
			}
			return err
		}
	}
	switch {
	case c.NodeID != e.a.config.NodeID:
		return wrpc.Errorf(wrpc.CodeBadRequest, "container %s is placed on node %s, not on %s", c.ID, c.NodeID, e.a.config.NodeID)
	case len(args.Launch.Command) == 0:
		return wrpc.Errorf(wrpc.CodeBadRequest, "container %s: launch command is empty", c.ID)
	case validateSecrets(args.Launch.Secrets) != nil:
		return wrpc.Errorf(wrpc.CodeBadRequest, "container %s: %v", c.ID, validateSecrets(args.Launch.Secrets))
	case scheduler.ValidateContainerResources(c.Resources) != nil:
		return wrpc.Errorf(wrpc.CodeBadRequest, "container %s: %v", c.ID, scheduler.ValidateContainerResources(c.Resources))
	case c.ExecutionType != "" && !scheduler.ExecutionType(c.ExecutionType).Valid():
		return wrpc.Errorf(wrpc.CodeBadRequest, "container %s: execution_type must be GUARANTEED or OPPORTUNISTIC, not %q", c.ID, c.ExecutionType)
	case e.a.epoch.Load() == 0:
		return wrpc.Errorf(wrpc.CodeUnavailable, "node %s is not registered yet", e.a.config.NodeID)
	}
	claims, err := e.a.checkContainerToken(ctx, args.Token, &c)
	if err != nil {
		return err
	}
	c.ExecutionType = string(claims.ExecutionType)
	// The account it may run as is the one the servers signed for, never
	// the caller's choice, nor that of a node that minted the token.
	if c.User, c.UID, err = e.a.accountOf(ctx, claims, args.AMToken); err != nil {
		return err
	}
	// Its app's AM starts it: a process running as that app's account.
	if err := e.a.checkCaller(ctx, "container "+c.ID, c.User, c.UID); err != nil {
		return err
	}
	// AM containers are launched by the agent itself, on the leader's
	// order: a client cannot claim one (and with it an AM's identity).
	c.IsAM = false
	resp, fresh := e.a.mgr.startByToken(c, e.a.withTLSEnv(args.Launch), claims.Expiry)
	if !fresh {
		return denied("container %s was started on node %s before: a container token starts its container once", c.ID, e.a.config.NodeID)
	}
	*reply = *resp
	return nil
}

// Stop stops a container of the token's app on this node; stopping one
// the node does not know does nothing.
func (e *containerEndpoint) Stop(ctx context.Context, args *wrpc.ContainerIDRequest, reply *struct{}) error {
	if err := checkID("id", args.ID); err != nil {
		return err
	}
	if relay, err := e.a.relayTarget(ctx, args.Node); relay {
		if err == nil {
			err = e.relayAMCall(ctx, args.Node, "Container.Stop", args.Token, args, reply)
		}
		return err
	}
	app, _, err := e.amToken(ctx, args.Token, args.ID, "stopping a container")
	if err != nil {
		return err
	}
	if app != "" {
		e.a.mgr.stop(args.ID, scheduler.ReasonKilled)
	}
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
	app, _ := e.a.mgr.appOf(args.ID)
	claims, err := e.a.checkAppToken(ctx, args.Token, app, args.ID)
	if err != nil {
		return err
	}
	if claims.Kind != identity.KindContainer || claims.ExecutionType != scheduler.Guaranteed {
		return denied("container %s: a promotion needs a container token of it as guaranteed, which the leader sends", args.ID)
	}
	if !e.a.mgr.promote(args.ID) {
		return wrpc.Errorf(wrpc.CodeConflict, "container %s is not running opportunistic on node %s", args.ID, e.a.config.NodeID)
	}
	return nil
}

// Status reports the token's app's containers on this node (all of them
// if no IDs are given).
func (e *containerEndpoint) Status(ctx context.Context, args *wrpc.ContainerStatusRequest, reply *wrpc.ContainerStatusResponse) error {
	if err := checkIDs("ids", args.IDs); err != nil {
		return err
	}
	if relay, err := e.a.relayTarget(ctx, args.Node); relay {
		if err == nil {
			err = e.relayAMCall(ctx, args.Node, "Container.Status", args.Token, args, reply)
		}
		return err
	}
	claims, err := e.a.checkAppToken(ctx, args.Token, "", "")
	if err != nil {
		return err
	}
	if claims.Kind != identity.KindAM {
		return denied("container status needs an AM token")
	}
	want := map[string]bool{}
	for _, id := range args.IDs {
		want[id] = true
	}
	for _, r := range e.a.mgr.reports() {
		if r.AppID == claims.AppID && (len(want) == 0 || want[r.ID]) {
			reply.Containers = append(reply.Containers, r)
		}
	}
	return nil
}

// Logs reads a container's stdout or stderr, for its app's AM or for a
// server relaying a read (with a container token of it). The ID is exact:
// it matches one container or none.
func (e *containerEndpoint) Logs(ctx context.Context, args *wrpc.ContainerLogsRequest, reply *wrpc.ContainerLogsResponse) error {
	if err := checkLogsRequest(args); err != nil {
		return err
	}
	if relay, err := e.a.relayTarget(ctx, args.Node); relay {
		if err == nil {
			err = e.relayAMCall(ctx, args.Node, "Container.Logs", args.Token, args, reply)
		}
		return err
	}
	app, _ := e.a.mgr.appOf(args.ID)
	claims, err := e.a.checkAppToken(ctx, args.Token, app, args.ID)
	if err != nil {
		return err
	}
	if app == "" {
		app = claims.AppID // a completed container the agent has forgotten
	}
	resp, err := e.a.mgr.logs(args, app)
	if err != nil {
		return err
	}
	*reply = *resp
	return nil
}

// Output reads a file a completed container of the token's app left in
// its work directory (SPEC §19): how a reduce task fetches its partition
// of a map's output. Only the app's AM token reads it (a container token
// is refused: no server relays output reads). The path stays inside the
// work directory, links included, and names a regular file; a container
// still running is a conflict. The ID is exact: it matches one container
// or none.
func (e *containerEndpoint) Output(ctx context.Context, args *wrpc.ContainerOutputRequest, reply *wrpc.ContainerOutputResponse) error {
	if err := checkOutputRequest(args); err != nil {
		return err
	}
	if relay, err := e.a.relayTarget(ctx, args.Node); relay {
		if err == nil {
			err = e.relayAMCall(ctx, args.Node, "Container.Output", args.Token, args, reply)
		}
		return err
	}
	_, claims, err := e.amToken(ctx, args.Token, args.ID, "reading its output")
	if err != nil {
		return err
	}
	// A container the agent has forgotten is looked for under the token's
	// app only.
	resp, err := e.a.mgr.output(args, claims.AppID)
	if err != nil {
		return err
	}
	*reply = *resp
	return nil
}

// amToken checks that token is the AM token of container id's app (when
// the agent still holds the container; else any app's, which the caller
// then holds to), for what; it returns the container's app ("" when the
// agent no longer holds it) and the token's claims.
func (e *containerEndpoint) amToken(ctx context.Context, token, id, what string) (string, *identity.Claims, error) {
	app, _ := e.a.mgr.appOf(id)
	claims, err := e.a.checkAppToken(ctx, token, app, id)
	if err != nil {
		return "", nil, err
	}
	if claims.Kind != identity.KindAM {
		return "", nil, denied("container %s: %s needs its app's AM token", id, what)
	}
	return app, claims, nil
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

// GossipKeyring lists or changes this agent's own gossip keyring, for the
// server answering an operator's keyring command (a server's certificate
// only).
func (e *agentEndpoint) GossipKeyring(ctx context.Context, args *wrpc.GossipKeyringRequest, reply *wrpc.GossipKeyringResponse) error {
	keyring := e.a.keyring.Load()
	if !keyring.Enabled() {
		return wrpc.Errorf(wrpc.CodeConflict, "gossip encryption is off on node %s", e.a.config.NodeID)
	}
	keys, err := keyring.Apply(args.Op, args.Key)
	if err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "%v", err)
	}
	reply.Keys = keys
	return nil
}
