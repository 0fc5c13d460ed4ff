package sim

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Config is one simulation run.
type Config struct {
	// Servers are the RPC addresses of a running server quorum.
	Servers []string
	// Nodes is how many simulated nodes join, each of NodeResources, spread
	// round-robin over Racks racks.
	Nodes         int
	NodeResources scheduler.Resources
	Racks         int
	Heartbeat     time.Duration
	// JoinRate is how many nodes start per second (0: 200), as a cluster's
	// agents start over a while rather than in one instant.
	JoinRate float64
	// QueueLength is each node's opportunistic queue length.
	QueueLength int
	// AMRMProxy gives every node a simulated AMRMProxy (Proxy), which
	// allocates its AMs' opportunistic asks.
	AMRMProxy bool
	// Policy is every node's opportunistic queue order and eviction.
	Policy scheduler.LocalPolicy
	// AMHeartbeat, if set, makes every AM allocate once every AMHeartbeat
	// without blocking, as YARN's AMs do (AMConfig.Heartbeat).
	AMHeartbeat time.Duration
	// NoTurnAwayFeedback keeps the AMRMProxies from hearing that a node
	// turned a container away.
	NoTurnAwayFeedback bool
	// Duration is how long the run is measured once the nodes have
	// registered and Warmup has passed.
	Duration time.Duration
	// Warmup, if set, runs the workload this long before measuring: a
	// cluster-bound run builds its backlog first, and what is measured is
	// the steady state, not the seconds in which the cluster was still
	// short of work.
	Warmup time.Duration
	// Jobs are submitted at their times from the start of the run.
	Jobs []Job
	// Progress, if set, receives a progress line every ProgressEvery.
	Progress      io.Writer
	ProgressEvery time.Duration
	Logger        hclog.Logger
	// Restart, if set, restarts the whole server quorum once during the
	// run (restart.go).
	Restart *RestartConfig
	// Started, if set, are the server processes the simulator started:
	// the summary gives the CPU each used over the measured run.
	Started *Servers
}

// Run is a simulation in progress, then done.
type Run struct {
	cfg   Config
	stats *Stats

	nodes  []*Node
	byID   map[string]*Node
	jobs   map[string]Job // by job ID, which is the app's name
	client *wrpc.Client   // the users': submissions and listings

	amsStarted atomic.Int64
	leaderID   atomic.Pointer[string] // the last leader seen
	warming    atomic.Bool            // the workload runs, not measured yet (Config.Warmup)
	queues     queueWatch             // each leaf queue's share, every second
	serverCPU  []ServerCPU
	amWG       sync.WaitGroup
	// amCtx ends with the run: AMs still working then stop.
	amCtx context.Context

	registerTook time.Duration
	registered   int
	downNodes    int
	downErr      error
	rereg        int

	// restart is what the restart measured (Config.Restart); reregBefore
	// counts the re-registrations before it, allBackAt is when the last
	// node had a heartbeat answered after it.
	restart     *RestartSummary
	reregBefore int
	allBackAt   time.Time
}

// Simulate runs cfg to its end and returns what it measured.
func Simulate(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Nodes < 1 || len(cfg.Servers) == 0 || cfg.Heartbeat <= 0 || cfg.Duration <= 0 {
		return nil, fmt.Errorf("sim: need servers, nodes, a heartbeat interval and a duration")
	}
	if cfg.Racks < 1 {
		cfg.Racks = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 5 * time.Second
	}
	r := &Run{cfg: cfg, byID: map[string]*Node{}, jobs: map[string]Job{}, client: wrpc.NewClient(cfg.Servers, wrpc.NewPool(nil))}
	defer r.client.Close()
	for _, j := range cfg.Jobs {
		r.jobs[j.ID] = j
	}
	r.stats = NewStats(time.Now())
	var stopAMs context.CancelFunc
	r.amCtx, stopAMs = context.WithCancel(ctx)
	defer stopAMs()
	nodeCtx, stopNodes := context.WithCancel(ctx)
	defer stopNodes()
	var nodeWG sync.WaitGroup
	for i := 0; i < cfg.Nodes; i++ {
		n, err := NewNode(NodeConfig{ID: fmt.Sprintf("sim-%05d", i), Rack: fmt.Sprintf("rack-%d", i%cfg.Racks), Capacity: cfg.NodeResources,
			Servers: cfg.Servers, Heartbeat: cfg.Heartbeat, QueueLength: cfg.QueueLength, Policy: cfg.Policy, Logger: cfg.Logger, Stats: r.stats,
			OnLaunchAM: r.launchAM, AMRMProxy: cfg.AMRMProxy})
		if err != nil {
			return nil, err
		}
		r.nodes = append(r.nodes, n)
		r.byID[n.ID()] = n
	}
	// Nodes join at JoinRate, over a heartbeat interval at least: not all
	// in the same millisecond.
	if cfg.JoinRate <= 0 {
		cfg.JoinRate = 200
	}
	began := time.Now()
	spread := max(cfg.Heartbeat, time.Duration(float64(cfg.Nodes)/cfg.JoinRate*float64(time.Second)))
	for i, n := range r.nodes {
		nodeWG.Add(1)
		go func() {
			defer nodeWG.Done()
			select {
			case <-time.After(spread * time.Duration(i) / time.Duration(cfg.Nodes)):
			case <-nodeCtx.Done():
				return
			}
			n.Run(nodeCtx)
		}()
	}
	r.registered = r.waitRegistered(ctx, began.Add(spread+time.Minute))
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if r.registered < len(r.nodes) && cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "sim: only %d of %d nodes registered within a minute of the last one starting; measuring anyway\n", r.registered, len(r.nodes))
	}
	r.registerTook = time.Since(began)
	r.stats = r.restartStats()
	cpuBefore := cfg.Started.cpu()
	runCtx, stopRun := context.WithTimeout(ctx, cfg.Warmup+cfg.Duration)
	defer stopRun()
	var wg sync.WaitGroup
	var capacity int64
	for _, n := range r.nodes {
		capacity += n.cfg.Capacity.Vcores
	}
	wg.Add(4)
	go func() { defer wg.Done(); r.submit(runCtx) }()
	go func() { defer wg.Done(); r.sample(runCtx) }()
	go func() { defer wg.Done(); r.watchLeader(runCtx) }()
	go func() { defer wg.Done(); r.watchQueues(runCtx, capacity) }()
	if cfg.Restart != nil {
		wg.Add(1)
		// The restart is measured to its end even past the run's: the
		// nodes heartbeat until it is over.
		go func() { defer wg.Done(); r.restartAt(runCtx, ctx) }()
	}
	if cfg.Warmup > 0 {
		r.warming.Store(true)
		select {
		case <-time.After(cfg.Warmup):
			cpuBefore = cfg.Started.cpu()
			r.restartStats()
			r.warming.Store(false)
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "sim: warmed up for %s; measuring from now\n", cfg.Warmup)
			}
		case <-runCtx.Done():
		}
	}
	<-runCtx.Done()
	wg.Wait()
	end := time.Now()
	r.serverCPU = cpuUsed(cfg.Started, cpuBefore, cfg.Started.cpu(), end.Sub(r.stats.Start()), r.leaderID.Load())
	r.stats.Freeze()
	// Which nodes the servers hold DOWN while every simulated node still
	// heartbeats: all of them are spurious.
	r.downNodes, r.downErr = r.countDown(ctx)
	for _, n := range r.nodes {
		r.rereg += n.Reregistrations()
	}
	r.restartDone()
	stopAMs()
	stopNodes()
	nodeWG.Wait()
	r.amWG.Wait()
	return r.result(end), ctx.Err()
}

// restartStats starts the measurements afresh: once every node has
// registered (the registration storm is not the steady state), and again
// when a warm-up ends. The nodes keep the same Stats.
func (r *Run) restartStats() *Stats {
	r.stats.restart(time.Now())
	r.amsStarted.Store(0)
	r.queues.mu.Lock()
	r.queues.points = nil
	r.queues.mu.Unlock()
	return r.stats
}

// waitRegistered waits until every node has registered, or the deadline,
// and returns how many have.
func (r *Run) waitRegistered(ctx context.Context, deadline time.Time) int {
	for {
		ready := 0
		for _, n := range r.nodes {
			n.mu.Lock()
			if n.epoch > 0 {
				ready++
			}
			n.mu.Unlock()
		}
		if ready == len(r.nodes) || time.Now().After(deadline) {
			return ready
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return ready
		}
	}
}

// launchAM starts the simulated AM of a launch a node was told of.
func (r *Run) launchAM(n *Node, l wrpc.AMLaunch) {
	job, ok := r.jobs[l.AppName]
	if !ok {
		r.cfg.Logger.Warn("an AM launch for an app this run did not submit; finishing it at once", "app", l.Container.AppID, "name", l.AppName)
		n.Finish(l.Container.ID)
		return
	}
	r.amsStarted.Add(1)
	r.amWG.Add(1)
	go func() {
		defer r.amWG.Done()
		am := NewAM(AMConfig{Job: job, Launch: l, Servers: r.cfg.Servers, Node: r.node, Stats: r.stats, Logger: r.cfg.Logger,
			Heartbeat: r.cfg.AMHeartbeat, NoTurnAwayFeedback: r.cfg.NoTurnAwayFeedback})
		if err := am.Run(r.amCtx); err != nil && r.amCtx.Err() == nil {
			r.cfg.Logger.Warn("simulated AM ended with an error", "app", l.Container.AppID, "error", err)
		}
	}()
}

func (r *Run) node(id string) *Node { return r.byID[id] }

// submit submits each job at its time, a few at once.
func (r *Run) submit(ctx context.Context) {
	start := time.Now()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, j := range r.cfg.Jobs {
		select {
		case <-time.After(time.Until(start.Add(j.At))):
		case <-ctx.Done():
			return
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			spec := scheduler.AppSpec{Name: j.ID, Queue: j.Queue, User: "sim", MaxAMAttempts: 1,
				DShell: scheduler.DShell{NumContainers: len(j.Tasks), Resources: j.Tasks[0].Resources,
					ExecutionType: j.Tasks[0].ExecutionType, Command: []string{"sim"}}}
			var resp wrpc.AppSubmitResponse
			if err := r.client.Call(ctx, "App.Submit", &wrpc.AppSubmitRequest{Spec: spec}, &resp); err != nil {
				if ctx.Err() == nil {
					r.stats.SubmitFailed(err)
				}
				return
			}
			r.stats.AppSubmitted(len(j.Tasks))
		}()
	}
}

// sample records running containers and utilisation every second, and
// prints progress.
func (r *Run) sample(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastProgress := time.Now()
	var capacity int64
	for _, n := range r.nodes {
		capacity += n.cfg.Capacity.Vcores
	}
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		running := 0
		var used, inUse int64
		for _, n := range r.nodes {
			running += n.Running()
			used += n.Used().Vcores
			inUse += n.InUse()
		}
		util := float64(used) / float64(max(1, capacity))
		now := time.Now()
		r.stats.Sample(now, running, util, float64(inUse)/float64(max(1, capacity)))
		if r.cfg.Progress != nil && now.Sub(lastProgress) >= r.cfg.ProgressEvery {
			lastProgress = now
			r.stats.mu.Lock()
			fmt.Fprintf(r.cfg.Progress, "sim %4.0fs: apps %d submitted, %d finished; tasks %d done; %d allocations; %d running; util %.0f%%; heartbeat p99 %s (%d failed)\n",
				now.Sub(r.stats.start).Seconds(), r.stats.appsSubmitted, r.stats.appsFinished, r.stats.tasksDone, r.stats.allocations,
				running, 100*util, r.stats.heartbeats.Quantile(0.99).Round(time.Millisecond), r.stats.heartbeatFailures)
			r.stats.mu.Unlock()
		}
	}
}

// watchLeader counts leadership changes, polling every second.
func (r *Run) watchLeader(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := ""
	for {
		var resp wrpc.LeaderResponse
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := r.client.Call(callCtx, "Status.Leader", &wrpc.RequestHeader{}, &resp)
		cancel()
		if err == nil && resp.ID != "" {
			if last != "" && resp.ID != last {
				r.stats.LeaderChanged()
			}
			last = resp.ID
			r.leaderID.Store(&last)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// countDown asks the servers how many of the simulated nodes they hold
// DOWN.
func (r *Run) countDown(ctx context.Context) (int, error) {
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var resp wrpc.NodeListResponse
	if err := r.client.Call(callCtx, "Node.List", &wrpc.NodeListRequest{State: string(scheduler.NodeDown)}, &resp); err != nil {
		return 0, err
	}
	down := 0
	for _, n := range resp.Nodes {
		if r.byID[n.ID] != nil {
			down++
		}
	}
	return down, nil
}
