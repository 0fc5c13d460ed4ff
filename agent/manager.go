package agent

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/weft-sched/weft/internal/clock"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// manager runs the containers of one node: the pure LocalScheduler decides
// what starts, waits, is evicted or dropped, and the manager carries that
// out with real processes and reports every container's state.
type manager struct {
	logger    hclog.Logger
	clock     clock.Clock // stamps container state changes
	nodeID    string
	dir       string // <data-dir>/containers
	killGrace time.Duration
	cg        *cgroups
	changed   func() // asks for an early heartbeat
	// retention, when set, is told of each completion, to remove the
	// container's directory log_retention later.
	retention *logRetention
	// runAs picks each container's Unix account, looking accounts up with
	// lookup; the agent sets both before the first start.
	runAs  runAsPolicy
	lookup lookupFunc
	// agentAddr is the agent's RPC address, which containers call (and
	// through which they reach other agents); set before the first start.
	agentAddr string
	// isolation is how containers start (in namespaces of their own, or
	// directly); the agent sets it before the first start.
	isolation isolation

	queueCapacity int

	mu   sync.Mutex
	ls   *scheduler.LocalScheduler
	byID map[string]*ctr
	ams  map[attemptKey]string // live AM containers here: app attempt → container ID
	// spent remembers the containers started here by token until their
	// tokens expire (Unix ns), so a token is never used twice, even after
	// the agent has forgotten its container.
	spent    map[string]int64
	prunedAt int64
	closed   bool
	procs    sync.WaitGroup
	// meanRun is a moving average of how long opportunistic containers
	// ran, for the queue-wait estimate.
	meanRun time.Duration
	// policy is the node's opportunistic policy (the local scheduler's);
	// procRoot where processes are measured (/proc); samples each running
	// container's last CPU measurement, measured the node's total at
	// lastMeasure (measure.go).
	policy      scheduler.LocalPolicy
	capacity    scheduler.Resources
	procRoot    string
	samples     map[string]usageSample
	measured    scheduler.Resources
	lastMeasure time.Time
}

// ctr is the agent's record of one container.
type ctr struct {
	info       rpc.ContainerInfo
	launch     rpc.LaunchSpec
	dir        string
	account    runAs
	state      scheduler.ContainerState
	exitCode   *int
	reason     scheduler.ExitReason
	diag       string
	at         int64 // last change, Unix ns
	startedAt  int64
	proc       *process
	killReason scheduler.ExitReason
	// recorded is set once the servers hold the container: an
	// opportunistic one's report carries its token until then.
	recorded bool
}

func newManager(logger hclog.Logger, clk clock.Clock, nodeID, dir string, capacity scheduler.Resources, queueLimit int, policy scheduler.LocalPolicy,
	killGrace time.Duration, cg *cgroups, changed func()) *manager {
	m := &manager{
		logger: logger.Named("containers"), clock: clk, nodeID: nodeID, dir: dir, killGrace: killGrace, cg: cg, changed: changed,
		ls: scheduler.NewLocalScheduler(capacity, queueLimit), byID: map[string]*ctr{}, ams: map[attemptKey]string{}, spent: map[string]int64{},
		queueCapacity: queueLimit, lookup: user.Lookup, policy: policy, capacity: capacity, procRoot: "/proc", samples: map[string]usageSample{},
	}
	m.ls.SetPolicy(policy)
	return m
}

// shed drops the newest queued opportunistic containers above limit
// (reason shed): the leader's queue rebalancing.
func (m *manager) shed(limit int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	act := m.ls.Shed(limit)
	if len(act.Drop) > 0 {
		m.logger.Info("shedding queued opportunistic containers above the pushed limit", "limit", limit, "count", len(act.Drop))
	}
	m.carryOut(act)
}

// start takes a container placed on this node. It is idempotent: a known ID
// reports its current state. A container whose IDs cannot name its
// directory (see containerDir) is refused and not recorded; one that may
// not run as any account here (see runAsPolicy) completes as failed.
func (m *manager) start(info rpc.ContainerInfo, launch rpc.LaunchSpec) *rpc.ContainerStartResponse {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.startLocked(info, launch)
}

// startByToken is start for a Container.Start whose token expires at
// expiry: a token is used once. It reports false, starting nothing, for a
// container this agent started before and has forgotten since (its end
// was reported), or whose directory a previous run left.
func (m *manager) startByToken(info rpc.ContainerInfo, launch rpc.LaunchSpec, expiry int64) (*rpc.ContainerStartResponse, bool) {
	now := m.clock.Now().UnixNano()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, known := m.byID[info.ID]; !known {
		if _, used := m.spent[info.ID]; used {
			return nil, false
		}
		dir, err := m.containerDir(info.AppID, info.ID)
		if err != nil {
			return m.startLocked(info, launch), true // refused for its IDs
		}
		if _, err := os.Lstat(dir); !os.IsNotExist(err) {
			return nil, false
		}
		if now-m.prunedAt > int64(time.Minute) {
			for id, exp := range m.spent {
				if exp <= now {
					delete(m.spent, id)
				}
			}
			m.prunedAt = now
		}
		m.spent[info.ID] = expiry
	}
	return m.startLocked(info, launch), true
}

// startLocked is start with m.mu held.
func (m *manager) startLocked(info rpc.ContainerInfo, launch rpc.LaunchSpec) *rpc.ContainerStartResponse {
	if c, ok := m.byID[info.ID]; ok {
		return &rpc.ContainerStartResponse{State: string(c.state), Reason: string(c.reason), Diagnostics: c.diag}
	}
	if m.closed {
		return &rpc.ContainerStartResponse{State: string(scheduler.ContainerCompleted), Reason: string(scheduler.ReasonRejected)}
	}
	dir, err := m.containerDir(info.AppID, info.ID)
	if err != nil {
		m.logger.Error("refusing a container with an invalid ID", "error", err)
		return &rpc.ContainerStartResponse{State: string(scheduler.ContainerCompleted), Reason: string(scheduler.ReasonFailed), Diagnostics: err.Error()}
	}
	et := scheduler.ExecutionType(info.ExecutionType)
	if !et.Valid() {
		et = scheduler.Guaranteed
	}
	c := &ctr{info: info, launch: launch, dir: dir, state: scheduler.ContainerQueued, at: m.clock.Now().UnixNano()}
	m.byID[info.ID] = c
	if info.IsAM {
		m.ams[attemptKey{info.AppID, info.Attempt}] = info.ID
	}
	if c.account, err = m.runAs.decide(info.User, info.UID, m.lookup); err != nil {
		m.logger.Error("refusing to start a container: no account may run it", "container", info.ID, "error", err)
		m.complete(c, nil, scheduler.ReasonFailed, "could not start on node "+m.nodeID+": "+err.Error())
		m.changed()
		return &rpc.ContainerStartResponse{State: string(c.state), Reason: string(c.reason), Diagnostics: c.diag}
	}
	m.ls.SetTime(m.clock.Now()) // run times, for least-waste eviction
	m.carryOut(m.ls.Submit(scheduler.LocalHints(scheduler.LocalContainer{ID: info.ID, AppID: info.AppID, Resources: info.Resources,
		ExecutionType: et}, info.ExpectedDuration, info.Progress)))
	return &rpc.ContainerStartResponse{State: string(c.state), Reason: string(c.reason), Diagnostics: c.diag}
}

// carryOut performs the scheduler's actions; m.mu must be held.
func (m *manager) carryOut(act scheduler.Actions) {
	for len(act.Start)+len(act.Kill)+len(act.Drop)+len(act.Pause)+len(act.Resume) > 0 {
		var next scheduler.Actions
		for _, id := range act.Pause {
			if c := m.byID[id]; c != nil && c.proc != nil && c.state == scheduler.ContainerRunning {
				m.pause(c, true)
			}
		}
		for _, id := range act.Resume {
			if c := m.byID[id]; c != nil && c.proc != nil && c.state == scheduler.ContainerPaused {
				m.pause(c, false)
			}
		}
		for _, id := range act.Start {
			c := m.byID[id]
			if err := m.launch(c); err != nil {
				m.logger.Error("container failed to start", "container", id, "error", err)
				m.complete(c, nil, scheduler.ReasonFailed, "could not start: "+err.Error())
				m.ls.SetTime(m.clock.Now())
				a := m.ls.Finished(id)
				next.Start = append(next.Start, a.Start...)
				next.Kill = append(next.Kill, a.Kill...)
				next.Drop = append(next.Drop, a.Drop...)
				next.Pause = append(next.Pause, a.Pause...)
				next.Resume = append(next.Resume, a.Resume...)
			}
		}
		for _, k := range act.Kill {
			if c := m.byID[k.ID]; c != nil && c.proc != nil {
				c.killReason = k.Reason
				if c.state == scheduler.ContainerPaused {
					m.pause(c, false) // a stopped process would not see its SIGTERM
				}
				go c.proc.kill(m.killGrace)
			}
		}
		for _, d := range act.Drop {
			if c := m.byID[d.ID]; c != nil {
				m.complete(c, nil, d.Reason, "never started: "+string(d.Reason))
			}
		}
		act = next
	}
	m.changed()
}

// pause stops (or, with stop false, resumes) a running container's
// processes: with its cgroup's freezer where the agent enforces cgroups,
// else with SIGSTOP (SIGCONT) to its process and every one below it. It
// keeps its memory and gives up the CPU; it is reported PAUSED. m.mu must
// be held.
func (m *manager) pause(c *ctr, stop bool) {
	if m.cg == nil || m.cg.freeze(c.info.ID, stop) != nil {
		sig := syscall.SIGSTOP
		if !stop {
			sig = syscall.SIGCONT
		}
		signalTree(m.procRoot, c.proc.pgid, sig)
	}
	c.state, c.at = scheduler.ContainerRunning, m.clock.Now().UnixNano()
	if stop {
		c.state = scheduler.ContainerPaused
		m.logger.Info("paused an opportunistic container to make room", "container", c.info.ID)
	} else {
		m.logger.Info("resumed a paused container", "container", c.info.ID)
	}
}

func (m *manager) launch(c *ctr) error {
	place := noCgroup
	if m.cg != nil {
		f, err := m.cg.create(c.info.ID, c.info.Resources)
		switch {
		case err != nil:
			m.logger.Warn("running container without cgroup limits", "container", c.info.ID, "error", err)
		case f != nil:
			defer f.Close()
			place.fd = int(f.Fd())
		default:
			id := c.info.ID
			place.attach = func(pid int) error { return m.cg.attach(id, pid) }
		}
	}
	env := m.env(c)
	sd, err := writeSecrets(c.dir, c.launch.Secrets, c.account.cred)
	if err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	if sd != "" {
		env = append(env, envSecretsDir+"="+sd)
	}
	p, err := m.isolation.startProcess(c.dir, c.launch.Command, env, place, c.account.cred)
	if err != nil {
		return err
	}
	c.proc, c.state, c.at = p, scheduler.ContainerRunning, m.clock.Now().UnixNano()
	c.startedAt = c.at
	m.logger.Debug("container started", "container", c.info.ID, "pid", p.pgid, "user", c.account.name, "why", c.account.why)
	m.procs.Add(1)
	go m.waitExit(c, p)
	return nil
}

func (m *manager) waitExit(c *ctr, p *process) {
	defer m.procs.Done()
	<-p.done
	m.mu.Lock()
	defer m.mu.Unlock()
	reason, diag := scheduler.ReasonExited, describeExit(p)
	switch {
	case c.killReason != "":
		reason = c.killReason
	case m.cg != nil && m.cg.oomKilled(c.info.ID):
		reason = scheduler.ReasonOOM
		diag = fmt.Sprintf("%s: the kernel killed it for passing its memory limit of %d MB", diag, c.info.Resources.MemoryMB)
	}
	m.complete(c, p.exitCode, reason, diag)
	if m.cg != nil {
		m.cg.remove(c.info.ID)
	}
	m.ls.SetTime(m.clock.Now())
	m.carryOut(m.ls.Finished(c.info.ID))
}

// runWeight is the weight of the newest run in the moving average.
const runWeight = 0.2

func (m *manager) complete(c *ctr, exitCode *int, reason scheduler.ExitReason, diag string) {
	c.state, c.exitCode, c.reason, c.diag, c.at = scheduler.ContainerCompleted, exitCode, reason, diag, m.clock.Now().UnixNano()
	if c.dir != "" {
		// Its account may be given to a later app: it can reach nothing
		// of this container's any more (the agent serves its logs and
		// output).
		dropSecrets(c.dir)
		os.Chmod(c.dir, 0o700)
	}
	if m.retention != nil && c.dir != "" {
		m.retention.completed(c.dir, c.at)
	}
	if k := (attemptKey{c.info.AppID, c.info.Attempt}); c.info.IsAM && m.ams[k] == c.info.ID {
		delete(m.ams, k)
	}
	if reason == scheduler.ReasonExited && c.startedAt > 0 && c.info.ExecutionType == string(scheduler.Opportunistic) {
		run := time.Duration(c.at - c.startedAt)
		if m.meanRun == 0 {
			m.meanRun = run
		} else {
			m.meanRun = time.Duration(runWeight*float64(run) + (1-runWeight)*float64(m.meanRun))
		}
	}
	m.logger.Debug("container completed", "container", c.info.ID, "reason", reason, "detail", diag)
}

// env is the agent's environment (minus its own WEFT_ variables), the
// account's USER, LOGNAME and HOME when the container changes user, the
// SPEC §12 variables, then the launch spec's (later ones win).
func (m *manager) env(c *ctr) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEFT_") {
			env = append(env, kv)
		}
	}
	if a := c.account; a.cred != nil {
		// The agent's own HOME and USER are not the container's. An app's
		// uid has no account: its name is the app's user's, its home the
		// container's work directory.
		name, home := a.name, a.home
		if home == "" {
			name, home = c.info.User, filepath.Join(c.dir, workDir)
		}
		env = append(env, "USER="+name, "LOGNAME="+name, "HOME="+home)
	}
	env = append(env,
		rpc.EnvContainerID+"="+c.info.ID,
		rpc.EnvAppID+"="+c.info.AppID,
		rpc.EnvNodeID+"="+m.nodeID,
		rpc.EnvExecutionType+"="+c.info.ExecutionType,
		rpc.EnvAgentAddr+"="+m.agentAddr,
	)
	for k, v := range c.launch.Env {
		env = append(env, k+"="+v)
	}
	return env
}

// stop stops a container: dropped if it waits, killed if it runs.
func (m *manager) stop(id string, reason scheduler.ExitReason) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.carryOut(m.ls.Stop(id, reason))
}

// stopAll stops every container, refuses new ones, and waits for every
// process to exit.
func (m *manager) stopAll(reason scheduler.ExitReason) {
	m.mu.Lock()
	m.closed = true
	for id, c := range m.byID {
		if c.state.Live() {
			m.carryOut(m.ls.Stop(id, reason))
		}
	}
	m.mu.Unlock()
	m.procs.Wait()
}

// reopen accepts containers again after stopAll (a re-registration).
func (m *manager) reopen() {
	m.mu.Lock()
	m.closed = false
	m.mu.Unlock()
}

// reports lists every container the agent knows; completed ones stay until
// the leader acknowledges them.
func (m *manager) reports() []rpc.ContainerReport {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]rpc.ContainerReport, 0, len(m.byID))
	for _, c := range m.byID {
		r := rpc.ContainerReport{ID: c.info.ID, AppID: c.info.AppID, Attempt: c.info.Attempt, AskID: c.info.AskID,
			Resources: c.info.Resources, ExecutionType: c.info.ExecutionType, State: c.state, ExitCode: c.exitCode,
			Reason: c.reason, Diagnostics: c.diag, AllocatedAt: c.info.AllocatedAt, StartedAt: c.startedAt, At: c.at}
		if !c.recorded && c.info.ExecutionType == string(scheduler.Opportunistic) {
			r.Token = c.info.Token // proves which AMRMProxy allocated it
		}
		out = append(out, r)
	}
	return out
}

// recorded notes the containers the servers said they hold: their reports
// no longer carry tokens.
func (m *manager) recorded(ids []string) {
	if len(ids) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		if c, ok := m.byID[id]; ok {
			c.recorded = true
		}
	}
}

// ack forgets completed containers the leader has recorded.
func (m *manager) ack(ids []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		if c, ok := m.byID[id]; ok && c.state == scheduler.ContainerCompleted {
			delete(m.byID, id)
		}
	}
}

func (m *manager) load() rpc.NodeLoad {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.ls.Load()
	out := rpc.NodeLoad{QueueCapacity: m.queueCapacity, RunningGuaranteed: l.RunningGuaranteed, RunningOpportunistic: l.RunningOpportunistic,
		Queued: l.Queued, Used: l.Used, UsedOpportunistic: l.UsedOpportunistic,
		EstimatedQueueWait: scheduler.EstimateQueueWait(l.Queued, l.RunningGuaranteed+l.RunningOpportunistic, m.meanRun)}
	out.Enforcement = m.cg.Label()
	if !m.lastMeasure.IsZero() {
		measured := m.measured
		out.Measured = &measured
		if o := m.policy.Overcommit; o.On() {
			limit := o.Limit(m.capacity)
			out.UseLimit = &limit
		}
	}
	return out
}

// promote makes a running opportunistic container guaranteed: the node no
// longer evicts it, and reports it as guaranteed. It reports whether the
// container was running opportunistic here.
func (m *manager) promote(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.byID[id]
	if !ok || !m.ls.Promote(id) {
		return false
	}
	c.info.ExecutionType = string(scheduler.Guaranteed)
	m.logger.Info("container promoted to guaranteed", "container", id)
	return true
}

// demote undoes a promotion the servers do not hold.
func (m *manager) demote(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.byID[id]; ok && m.ls.Demote(id) {
		c.info.ExecutionType = string(scheduler.Opportunistic)
		m.logger.Warn("container was promoted without the servers; opportunistic again", "container", id)
	}
}

// runningAM returns the container ID of the app attempt's AM if it runs
// (or waits to) on this node.
func (m *manager) runningAM(app string, attempt int) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	token, ok := m.ams[attemptKey{app, attempt}]
	return token, ok
}

// amUser returns the user of the app attempt's AM container on this node
// ("" when none runs here): the user the leader launched it for.
func (m *manager) amUser(app string, attempt int) (user string, uid uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.byID[m.ams[attemptKey{app, attempt}]]; c != nil {
		return c.info.User, c.info.UID
	}
	return "", 0
}

// appOf returns the app of a container the agent knows.
func (m *manager) appOf(id string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.byID[id]
	if !ok {
		return "", false
	}
	return c.info.AppID, true
}

// logs reads up to limit bytes of a container's stdout or stderr from
// offset; app is the container's app, whose directory holds it.
func (m *manager) logs(req *rpc.ContainerLogsRequest, app string) (*rpc.ContainerLogsResponse, error) {
	stream := req.Stream
	if stream == "" {
		stream = rpc.StreamStdout
	}
	if stream != rpc.StreamStdout && stream != rpc.StreamStderr {
		return nil, fmt.Errorf("stream must be stdout or stderr, not %q", stream)
	}
	limit := req.Limit
	if limit <= 0 || limit > rpc.MaxLogChunk {
		limit = rpc.MaxLogChunk
	}
	m.mu.Lock()
	c, known := m.byID[req.ID]
	done := !known || c.state == scheduler.ContainerCompleted
	dir := ""
	if known {
		dir = c.dir
	}
	m.mu.Unlock()
	if !known {
		// Completed containers' logs stay on disk after the agent forgets
		// them, under the app the caller's token names.
		var err error
		if dir, err = m.storedDir(app, req.ID); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, stream), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if os.IsNotExist(err) {
		// Known but not started yet, or started without output so far.
		return &rpc.ContainerLogsResponse{NextOffset: req.Offset, Done: done}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, limit)
	n, err := f.ReadAt(buf, req.Offset)
	if err != nil && err != io.EOF {
		return nil, err
	}
	resp := &rpc.ContainerLogsResponse{Data: buf[:n], NextOffset: req.Offset + int64(n)}
	if fi, err := f.Stat(); err == nil {
		resp.Done = done && resp.NextOffset >= fi.Size()
	}
	return resp, nil
}
