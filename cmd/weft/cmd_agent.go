package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/weft-sched/weft/agent"
	"github.com/weft-sched/weft/am"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

func runAgent(args []string) error {
	fs := newFlagSet("agent")
	var (
		nodeID, dataDir, bind, resources, rack, logLevel string
		rpcPort, serfPort, queueLen                      int
		join                                             stringList
		lazy                                             bool
	)
	fs.StringVar(&nodeID, "node-id", "", "`ID` of this node (default: the hostname)")
	fs.StringVar(&dataDir, "data-dir", "", "`DIR` for container directories, logs and serf state (required)")
	fs.StringVar(&bind, "bind", "127.0.0.1", "`IP` to listen on and advertise")
	fs.IntVar(&rpcPort, "rpc-port", agent.DefaultRPCPort, "`PORT` for the AMRMProxy and container management")
	fs.IntVar(&serfPort, "serf-port", agent.DefaultSerfPort, "`PORT` for serf gossip")
	fs.Var(&join, "join", "serf `ADDR` of any cluster member (repeatable; at least one)")
	fs.StringVar(&resources, "resources", agent.DefaultResources.String(), "capacity offered, e.g. `memory_mb=8192,vcores=8,gpu=2`")
	fs.StringVar(&rack, "rack", agent.DefaultRack, "`RACK` of this node, for locality")
	fs.IntVar(&queueLen, "opportunistic-queue-length", agent.DefaultOpportunisticQueueLength, "most opportunistic containers that may wait here (`N`; 0 never queues)")
	fs.BoolVar(&lazy, "lazy-heartbeats", false, "heartbeat only every second, not also when a container changes state (fewer leader writes, slower feedback)")
	fs.StringVar(&logLevel, "log-level", "info", "log `LEVEL`")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usagef("weft agent takes no arguments, got %q", pos[0])
	case dataDir == "":
		return usagef("weft agent needs -data-dir DIR: where it keeps container directories and logs")
	case len(join) == 0:
		return usagef("weft agent needs -join ADDR: the serf address of any server or agent")
	case queueLen < 0:
		return usagef("-opportunistic-queue-length must not be negative")
	}
	res, err := scheduler.ParseResources(resources)
	if err != nil {
		return usagef("-resources: %v", err)
	}
	logger, err := newLogger(logLevel)
	if err != nil {
		return err
	}
	a, err := agent.New(&agent.Config{
		NodeID: nodeID, DataDir: dataDir, BindAddr: bind, RPCPort: rpcPort, SerfPort: serfPort, Join: join,
		Resources: res, Rack: rack, OpportunisticQueueLength: queueLen, LazyHeartbeats: lazy, Build: version, Logger: logger,
	})
	if err != nil {
		return err
	}
	return waitForSignal(logger, a.Leave, a.Shutdown)
}

// runAM runs a built-in application master inside its container.
func runAM(args []string) error {
	if len(args) != 1 || args[0] != scheduler.AMTypeDShell {
		return usagef("usage: weft am dshell (started by an agent inside an AM container)")
	}
	client, err := rpc.NewAMClientFromEnv()
	if err != nil {
		return err
	}
	defer client.Close()
	logger, _ := newLogger("info")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := am.NewDShell(client, logger).Run(ctx); err != nil {
		return fmt.Errorf("dshell AM: %w", err)
	}
	fmt.Fprintln(os.Stderr, "dshell AM done")
	return nil
}
