package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weft-sched/weft/internal/config"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/sim"
)

// runSim runs the load simulator (SPEC §17) against a server quorum given
// or started here.
func runSim(args []string) error {
	fs := newFlagSet("sim")
	var servers, nodeRes, trace, out, logLevel, taskRes, queues, serverConfig, restartSignal, cpuProfile, memProfile, gcSpec string
	var startServers, nodes, racks, queueLen, apps, tasksMin, tasksMax, nodesUsed, serverGC, perAM int
	var proxy, sharedList, turnAway, pause bool
	var loadComparator, queuePolicy, eviction, overcommit string
	var maxQueueWait time.Duration
	var heartbeat, amHeartbeat, duration, warmup, taskMin, taskMax, restartAt time.Duration
	var rate, opp, joinRate float64
	var seed uint64
	fs.StringVar(&servers, "servers", "", "comma-separated RPC `ADDRS` of a running server quorum")
	fs.IntVar(&startServers, "start-servers", 0, "start `N` weft server processes on 127.0.0.1 instead (open, in a temporary directory)")
	fs.StringVar(&serverConfig, "server-config", "", "with -start-servers: HCL `FILE` of settings added to every server's config (such as max_completed_apps = 100000; no limits block)")
	fs.IntVar(&serverGC, "server-gc-percent", 0, "with -start-servers: the servers' gc_percent (their Go collector's GOGC; 0: Go's default)")
	fs.DurationVar(&restartAt, "restart-at", 0, "with -start-servers: stop every server this long into the run and start them again on the same data, measuring their return")
	fs.StringVar(&restartSignal, "restart-signal", "kill", "how -restart-at stops the servers: kill (SIGKILL, a crash) or term (SIGTERM, a graceful leave)")
	fs.IntVar(&nodes, "nodes", 100, "how many simulated nodes (`N`)")
	fs.StringVar(&nodeRes, "node-resources", "memory_mb=65536,vcores=64", "capacity of each simulated node")
	fs.IntVar(&racks, "racks", 1, "spread the nodes round-robin over `R` racks")
	fs.DurationVar(&heartbeat, "heartbeat", time.Second, "node heartbeat interval")
	fs.Float64Var(&joinRate, "join-rate", 200, "how many nodes start per second")
	fs.IntVar(&queueLen, "queue-length", 10, "each node's opportunistic queue length")
	fs.BoolVar(&proxy, "amrmproxy", true, "give each node an AMRMProxy that allocates its AMs' opportunistic asks (false: the AMs ask the leader)")
	fs.IntVar(&nodesUsed, "nodes-used", 0, "with -start-servers: set opportunistic.nodes_used, the length of the leader's least-loaded list (0: the default, 10)")
	fs.BoolVar(&sharedList, "shared-list", false, "with -start-servers: set opportunistic.shared_list, every agent getting the same list rather than a window of its own")
	fs.StringVar(&loadComparator, "load-comparator", "", "with -start-servers: set opportunistic.load_comparator (`queue_length` or queue_wait_time)")
	fs.IntVar(&perAM, "max-allocations-per-am", 0, "with -start-servers: set opportunistic.max_allocations_per_am_heartbeat (0: no cap)")
	fs.DurationVar(&amHeartbeat, "am-heartbeat", 0, "AMs allocate once every `INTERVAL` without blocking, as YARN's AMs do (0: each AM.Allocate blocks until there is news)")
	fs.BoolVar(&pause, "pause", false, "nodes pause opportunistic containers to make room for guaranteed ones rather than kill them (an agent's opportunistic.pause)")
	fs.StringVar(&eviction, "eviction", scheduler.EvictLeastWaste, "which opportunistic containers a guaranteed arrival evicts: `least_waste` or newest_first")
	fs.StringVar(&queuePolicy, "queue-policy", scheduler.QueueFIFO, "the order of nodes' opportunistic queues: `fifo`, shortest_first or nearest_completion")
	fs.StringVar(&overcommit, "overcommit", "", "nodes start opportunistic containers into allocated but idle capacity while measured use stays under these fractions of capacity, `memory_mb=F,vcores=F` (a simulated AM uses no CPU)")
	fs.DurationVar(&maxQueueWait, "max-queue-wait", 0, "a queued container that waited longer goes to the head (0: never)")
	fs.BoolVar(&turnAway, "turn-away-feedback", true, "AMRMProxies hear that a node turned a container away and place nothing more there until their next list")
	fs.DurationVar(&duration, "duration", time.Minute, "how long to measure once the nodes have registered (and -warmup has passed)")
	fs.DurationVar(&warmup, "warmup", 0, "run the workload this long before measuring, so that a cluster-bound run is measured once its backlog has built up")
	fs.StringVar(&trace, "trace", "", "YARN SLS JSON trace `FILE` to replay (else the synthetic workload below)")
	fs.Float64Var(&rate, "apps-per-second", 1, "synthetic: mean app arrival rate (0: no apps, heartbeats only)")
	fs.IntVar(&apps, "apps", 0, "synthetic: how many apps in all (0: as many as -duration allows)")
	fs.IntVar(&tasksMin, "tasks-min", 10, "synthetic: fewest tasks per app")
	fs.IntVar(&tasksMax, "tasks-max", 100, "synthetic: most tasks per app")
	fs.DurationVar(&taskMin, "task-duration-min", 2*time.Second, "synthetic: shortest task")
	fs.DurationVar(&taskMax, "task-duration-max", 10*time.Second, "synthetic: longest task")
	fs.StringVar(&taskRes, "task-resources", "memory_mb=1024,vcores=1", "resources of each task (a trace's own container.memory/vcores win)")
	fs.StringVar(&queues, "queues", scheduler.DefaultQueue+"=1", "synthetic: queue mix, `QUEUE=WEIGHT,...` (the queues must exist)")
	fs.Float64Var(&opp, "opportunistic", 0, "synthetic: fraction of apps whose tasks are opportunistic")
	fs.Uint64Var(&seed, "seed", 1, "synthetic: random seed")
	fs.StringVar(&out, "out", "", "write summary.txt, summary.json, series.csv and SVG charts into `DIR`")
	fs.StringVar(&memProfile, "memprofile", "", "write the simulator's own allocation profile (everything it allocated over the run) to `FILE` (go tool pprof)")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write the simulator's own CPU profile over the whole run to `FILE` (go tool pprof), to tell its cost from the servers'")
	fs.StringVar(&logLevel, "log-level", "error", "log `LEVEL` of the simulator")
	fs.StringVar(&gcSpec, "gc-limit", "auto", "the simulator's own garbage collection: auto (collect only near a memory limit sized to -nodes, so that its collections seldom disturb what it measures), off (Go's default, GOGC), or a limit in `MiB`")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("weft sim takes no arguments, got %q", pos[0])
	}
	if (servers == "") == (startServers == 0) {
		return usagef("give -servers ADDR,... or -start-servers N")
	}
	if nodes < 1 || racks < 1 || heartbeat <= 0 || duration <= 0 {
		return usagef("-nodes, -racks, -heartbeat and -duration must be positive")
	}
	if warmup < 0 || warmup > 0 && restartAt > 0 {
		return usagef("-warmup: give a positive duration, without -restart-at (a restart is timed from the start of the measured run)")
	}
	if nodesUsed < 0 || nodesUsed > 0 && startServers == 0 {
		return usagef("-nodes-used: give a positive count, with -start-servers (servers given with -servers keep their configuration)")
	}
	if (sharedList || loadComparator != "" || perAM != 0) && startServers == 0 {
		return usagef("-shared-list, -load-comparator and -max-allocations-per-am need -start-servers (servers given with -servers keep their configuration)")
	}
	if amHeartbeat < 0 || maxQueueWait < 0 {
		return usagef("-am-heartbeat and -max-queue-wait must not be negative")
	}
	policy := scheduler.LocalPolicy{QueuePolicy: queuePolicy, MaxQueueWait: maxQueueWait, Eviction: eviction, Pause: pause}
	if policy.Overcommit, err = parseOvercommit(overcommit); err != nil {
		return usagef("-overcommit: %v", err)
	}
	if err := policy.Validate(); err != nil {
		return usagef("%v", err)
	}
	restart, extraConfig, err := simRestartFlags(startServers, duration, restartAt, restartSignal, serverConfig)
	if err != nil {
		return err
	}
	if serverGC != 0 {
		if startServers == 0 {
			return usagef("-server-gc-percent needs -start-servers: servers given with -servers keep their configuration")
		}
		if err := config.CheckGCPercent(serverGC); err != nil {
			return usagef("-server-gc-percent %v", err)
		}
		extraConfig += fmt.Sprintf("\ngc_percent = %d\n", serverGC)
	}
	capacity, err := scheduler.ParseResources(nodeRes)
	if err != nil {
		return usagef("-node-resources: %v", err)
	}
	taskR, err := scheduler.ParseResources(taskRes)
	if err != nil {
		return usagef("-task-resources: %v", err)
	}
	var jobs []sim.Job
	if trace != "" {
		f, err := os.Open(trace)
		if err != nil {
			return err
		}
		jobs, err = sim.ParseSLS(f, taskR)
		f.Close()
		if err != nil {
			return err
		}
	} else {
		mix, err := parseQueueMix(queues)
		if err != nil {
			return usagef("-queues: %v", err)
		}
		syn := sim.Synthetic{AppsPerSecond: rate, Apps: apps, Duration: warmup + duration, TasksMin: tasksMin, TasksMax: tasksMax,
			TaskMin: taskMin, TaskMax: taskMax, Resources: taskR, Queues: mix, Opportunistic: opp, Seed: seed}
		if jobs, err = syn.Generate(); err != nil {
			return usagef("%v", err)
		}
	}
	logger, err := newLogger(logLevel, false)
	if err != nil {
		return err
	}
	gcLimit, err := sim.GCLimit(gcSpec, nodes)
	if err != nil {
		return usagef("-gc-limit: %v", err)
	}
	sim.SetGCLimit(gcLimit) // not the servers': they are measured as they run
	// The servers started below inherit the limit.
	if want := sim.OpenFilesFor(nodes); want > 0 {
		if got, err := sim.RaiseOpenFiles(want); err != nil || got < want {
			fmt.Fprintf(stderr, "sim: warning: %d nodes may need %d open files and the limit is %d (raise it with ulimit -n, or run as root): connections will fail\n", nodes, want, got)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	addrs := strings.Split(servers, ",")
	var started *sim.Servers
	if startServers > 0 {
		dir, err := os.MkdirTemp("", "weft-sim-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "sim: starting %d server processes in %s\n", startServers, dir)
		opts := sim.ServerOptions{Config: extraConfig}
		if restart != nil {
			opts.LogLevel = "info" // the restart's figures come from the servers' logs
		}
		srv, err := sim.StartServers(ctx, exe, startServers, dir, opts)
		if err != nil {
			return err
		}
		defer srv.Stop()
		addrs = srv.Addrs
		if nodesUsed > 0 || sharedList || loadComparator != "" || perAM != 0 {
			err := sim.SetOpportunistic(ctx, addrs, func(o *scheduler.OpportunisticConfig) {
				if nodesUsed > 0 {
					o.NodesUsed = nodesUsed
				}
				o.SharedList, o.LoadComparator, o.MaxAllocationsPerAMHeartbeat = sharedList, loadComparator, perAM
			})
			if err != nil {
				return usagef("%v", err)
			}
		}
		started = srv
		if restart != nil {
			restart.Servers = srv
		}
	}
	fmt.Fprintf(stderr, "sim: %d nodes of %s joining %s; %d apps to submit over %s\n", nodes, capacity, strings.Join(addrs, ","), len(jobs), duration)
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	res, err := sim.Simulate(ctx, sim.Config{Servers: addrs, Nodes: nodes, NodeResources: capacity, Racks: racks, Heartbeat: heartbeat, JoinRate: joinRate,
		QueueLength: queueLen, AMRMProxy: proxy, AMHeartbeat: amHeartbeat, NoTurnAwayFeedback: !turnAway, Policy: policy, Duration: duration, Warmup: warmup, Jobs: jobs, Progress: stderr, Logger: logger, Restart: restart, Started: started})
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, res.Summary.Text())
	if memProfile != "" {
		f, err := os.Create(memProfile)
		if err != nil {
			return err
		}
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("-memprofile: %w", err)
		}
	}
	if out != "" {
		if err := res.WriteFiles(out); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "sim: wrote %s\n", out)
	}
	return nil
}

// simRestartFlags checks -restart-at, -restart-signal and -server-config
// and returns the restart (nil without -restart-at) and the extra server
// configuration.
func simRestartFlags(startServers int, duration, at time.Duration, signal, configFile string) (*sim.RestartConfig, string, error) {
	if startServers == 0 && (at != 0 || configFile != "") {
		return nil, "", usagef("-restart-at and -server-config need -start-servers: the simulator restarts and configures only servers it started")
	}
	var extra string
	if configFile != "" {
		src, err := os.ReadFile(configFile)
		if err != nil {
			return nil, "", usagef("-server-config: %v", err)
		}
		cfg := config.DefaultServer()
		if err := config.MergeFile(cfg, configFile, src, nil); err != nil {
			return nil, "", usagef("-server-config: %v", err)
		}
		if cfg.Limits != nil {
			return nil, "", usagef("-server-config: %s has a limits block; leave it out (the simulator sets its own limits)", configFile)
		}
		extra = string(src)
	}
	if at == 0 {
		return nil, extra, nil
	}
	if at < 0 || at >= duration {
		return nil, "", usagef("-restart-at %s: must be positive and before the run's end (-duration %s)", at, duration)
	}
	rc := &sim.RestartConfig{At: at}
	switch signal {
	case "kill":
		rc.Signal = syscall.SIGKILL
	case "term":
		rc.Signal = syscall.SIGTERM
	default:
		return nil, "", usagef("-restart-signal %q: use kill or term", signal)
	}
	return rc, extra, nil
}

// parseQueueMix reads QUEUE=WEIGHT,... (a bare QUEUE weighs 1).
func parseQueueMix(s string) (map[string]float64, error) {
	mix := map[string]float64{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, w, found := strings.Cut(part, "=")
		weight := 1.0
		if found {
			var err error
			if weight, err = strconv.ParseFloat(w, 64); err != nil || weight <= 0 {
				return nil, fmt.Errorf("%q: the weight must be a positive number", part)
			}
		}
		mix[name] = weight
	}
	if len(mix) == 0 {
		return nil, fmt.Errorf("no queues")
	}
	return mix, nil
}

// parseOvercommit reads "memory_mb=F,vcores=F" (either may be left out;
// "" is no overcommit).
func parseOvercommit(s string) (scheduler.Overcommit, error) {
	var o scheduler.Overcommit
	if s == "" {
		return o, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			return o, fmt.Errorf("%q is not NAME=FRACTION", kv)
		}
		switch k {
		case "memory_mb":
			o.MemoryMB = f
		case "vcores":
			o.Vcores = f
		default:
			return o, fmt.Errorf("%q: overcommit names memory_mb and vcores only", k)
		}
	}
	return o, nil
}
