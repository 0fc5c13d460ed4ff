package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/weft-sched/weft/agent"
	"github.com/weft-sched/weft/am"
	"github.com/weft-sched/weft/internal/config"
	"github.com/weft-sched/weft/internal/gossip"
	"github.com/weft-sched/weft/internal/metrics"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

func runAgent(args []string) error {
	cfg := config.DefaultAgent()
	fs := newFlagSet("agent")
	config.RegisterFlags(fs, cfg)
	if err := loadConfig(fs, cfg, args, "agent"); err != nil {
		return err
	}
	warning, err := config.CheckSecure("agent", cfg.Bind, cfg.SecurityGaps(fileExists(gossip.KeyringFile(cfg.DataDir))), cfg.Insecure)
	if err != nil {
		return usagef("%v", err)
	}
	retention, _ := cfg.LogRetentionDuration() // checked by loadConfig
	policy, _ := cfg.LocalPolicy()             // checked by loadConfig
	if cfg.JoinToken == "" {
		cfg.JoinToken = os.Getenv("WEFT_JOIN_TOKEN")
	}
	firstUID, lastUID, err := config.ParseUIDRange(cfg.DynamicUIDRange)
	if err != nil {
		return usagef("%v", err)
	}
	logger, err := newLogger(cfg.LogLevel, cfg.LogJSON)
	if err != nil {
		return err
	}
	tc, err := tlsConfigurator(cfg.TLS, cfg.Region)
	if err != nil {
		return err
	}
	stopWarning := warnInsecure(logger, warning)
	defer stopWarning()
	if err := metrics.Init(); err != nil {
		return err
	}
	a, err := agent.New(&agent.Config{
		NodeID: cfg.NodeID, DataDir: cfg.DataDir, BindAddr: cfg.Bind, RPCPort: cfg.RPCPort, SerfPort: cfg.SerfPort,
		Join: cfg.Join, Resources: cfg.NodeCapacity(), Rack: cfg.Rack, OpportunisticQueueLength: cfg.OpportunisticQueueLength,
		Opportunistic:  policy,
		LazyHeartbeats: cfg.LazyHeartbeats, AllowRoot: cfg.AllowRoot, RunAsUser: cfg.RunAsUser, Encrypt: cfg.Encrypt, Build: version, Logger: logger, TLS: tc,
		Limits: rpcLimits(cfg.Limits), LogRetention: retention, JoinToken: cfg.JoinToken, JoinTokenFile: cfg.JoinTokenFile,
		DynamicUIDs: [2]uint32{firstUID, lastUID},
	})
	if err != nil {
		return err
	}
	_, stopHTTP, err := serveAgentHTTP(logger, cfg.Bind, cfg.HTTPPort, a, tc)
	if err != nil {
		a.Shutdown()
		return err
	}
	defer reloadOnSIGHUP(logger, tc)()
	return waitForSignal(logger, thenStop(stopHTTP, a.Leave), thenStop(stopHTTP, a.Shutdown))
}

// runAM runs a built-in application master inside its container.
func runAM(args []string) error {
	return subcommand("am", args, map[string]func([]string) error{
		scheduler.AMTypeDShell: runAMDShell, scheduler.AMTypeMapReduce: runAMMapReduce,
		"map-task": runMapTask, "reduce-task": runReduceTask,
	})
}

func runAMDShell(args []string) error {
	pos, err := parseArgs(newFlagSet("am dshell"), args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("weft am dshell takes no arguments (an agent starts it inside an AM container)")
	}
	client, err := rpc.NewAMClientFromEnv()
	if err != nil {
		return err
	}
	defer client.Close()
	logger, _ := newLogger("info", false)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := am.NewDShell(client, logger).Run(ctx); err != nil {
		return fmt.Errorf("dshell AM: %w", err)
	}
	fmt.Fprintln(os.Stderr, "dshell AM done")
	return nil
}
