package sim

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// RestartConfig has a run restart its whole server quorum once
// (Config.Restart): every server process is stopped at the same moment
// and started again on the same ports and data directories, while the
// simulated nodes keep heartbeating and the AMs keep asking.
type RestartConfig struct {
	// At is when, from the start of the measured run.
	At time.Duration
	// Servers are the processes restarted. Their log level must be info:
	// the restore figures come from their logs.
	Servers *Servers
	// Signal stops them: SIGKILL (also when 0) is a crash, SIGTERM a
	// graceful leave.
	Signal syscall.Signal
}

// RestartSummary is what a whole-cluster restart measured. Times are in
// milliseconds from the moment the servers were signalled.
type RestartSummary struct {
	Signal    string  `json:"signal"`
	AtSeconds float64 `json:"at_seconds"`
	// Before and After are the state the leader held just before the
	// restart and once every node heartbeated again.
	Before StateCounts `json:"state_before"`
	After  StateCounts `json:"state_after"`
	// StoppedMS is when the last process had exited; LeaderMS when a
	// server first took leadership (by its log, or when one first named a
	// leader to Status.Leader, whichever is earlier); ReadyMS when the first node heartbeat
	// was answered (the leader had applied its barrier: until then it
	// answers not_ready); AllNodesMS when every node registered before the
	// restart had a heartbeat answered again.
	StoppedMS  float64 `json:"stopped_ms"`
	LeaderMS   float64 `json:"leader_elected_ms"`
	ReadyMS    float64 `json:"leader_ready_ms"`
	AllNodesMS float64 `json:"all_nodes_heartbeating_ms"`
	// NodesLive were registered when the servers were stopped; NodesBack
	// of them had a heartbeat answered afterwards.
	NodesLive int `json:"nodes_live"`
	NodesBack int `json:"nodes_back"`
	// HeartbeatsFailed failed between the stop and the last node's return.
	HeartbeatsFailed uint64 `json:"heartbeats_failed"`
	// SpuriousDown is how many of the nodes the servers held DOWN once
	// every node was back; Reregistrations how often nodes were told to
	// register again from the restart to the end of the run. Both must be
	// zero: every node kept heartbeating.
	SpuriousDown    int    `json:"spurious_down_nodes"`
	DownCheckError  string `json:"down_check_error,omitempty"`
	Reregistrations int    `json:"reregistrations"`
	// Servers are each server's figures from its log.
	Servers []ServerRestart `json:"servers"`
	// Error says what could not be measured, if anything.
	Error string `json:"error,omitempty"`
}

// StateCounts is the size of the servers' state, as the leader answers
// Status.Cluster and App.List.
type StateCounts struct {
	Nodes        int    `json:"nodes"`
	NodesDown    int    `json:"nodes_down"`
	Apps         int    `json:"apps"`
	AppsFinished int    `json:"apps_finished"`
	Containers   int    `json:"containers"`
	Index        uint64 `json:"applied_index"`
	// TookMS is how long the two calls took.
	TookMS float64 `json:"took_ms"`
}

// restartWithin bounds how long a restart is watched: the servers that
// have not brought every node back by then are reported as such.
const restartWithin = 10 * time.Minute

// restartAt waits until cfg.Restart.At into the run (runCtx), restarts
// the servers and measures their return until every node is back, ctx
// ends or restartWithin has passed. The re-registrations are counted when
// the run ends (restartDone).
func (r *Run) restartAt(runCtx, ctx context.Context) {
	rc := *r.cfg.Restart
	if rc.Signal == 0 {
		rc.Signal = syscall.SIGKILL
	}
	sum := &RestartSummary{Signal: signalName(rc.Signal), AtSeconds: rc.At.Seconds()}
	r.restart = sum
	select {
	case <-time.After(time.Until(r.stats.Start().Add(rc.At))):
	case <-runCtx.Done():
		sum.Error = "the run ended before the restart"
		return
	}
	var errs []string
	defer func() { sum.Error = strings.Join(errs, "; ") }()
	var err error
	if sum.Before, err = r.stateCounts(ctx); err != nil {
		errs = append(errs, fmt.Sprintf("counting the state before the restart: %v", err))
	}
	var live []*Node
	for _, n := range r.nodes {
		n.mu.Lock()
		if n.epoch > 0 {
			live = append(live, n)
		}
		r.reregBefore += n.reregistrations
		n.mu.Unlock()
	}
	sum.NodesLive = len(live)
	failedBefore := r.heartbeatFailures()
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "sim: restarting every server (%s) with %d nodes, %d apps, %d containers in the state\n",
			sum.Signal, sum.Before.Nodes, sum.Before.Apps, sum.Before.Containers)
	}
	began := time.Now()
	since := func(t time.Time) float64 { return ms(t.Sub(began)) }
	rc.Servers.Halt(rc.Signal)
	stopped := time.Now()
	sum.StoppedMS = since(stopped)
	// What the servers log from here on is their return; with SIGTERM
	// they may have elected a leader among themselves while leaving, and
	// nodes may have been answered then: neither counts.
	offsets := rc.Servers.logOffsets()
	if err := rc.Servers.Start(); err != nil {
		errs = append(errs, fmt.Sprintf("starting the servers again: %v", err))
		return
	}
	watchCtx, cancel := context.WithTimeout(ctx, restartWithin)
	defer cancel()
	leader, ready, back := r.watchReturn(watchCtx, rc.Servers.Addrs, live, stopped)
	if !leader.IsZero() {
		sum.LeaderMS = since(leader)
	}
	if !ready.IsZero() {
		sum.ReadyMS = since(ready)
	}
	sum.NodesBack = back
	sum.HeartbeatsFailed = r.heartbeatFailures() - failedBefore
	if back < len(live) {
		errs = append(errs, fmt.Sprintf("%.1f s after the restart only %d of %d nodes were back", time.Since(began).Seconds(), back, len(live)))
	} else {
		sum.AllNodesMS = since(r.allBackAt)
		var downErr error
		if sum.SpuriousDown, downErr = r.countDown(ctx); downErr != nil {
			sum.DownCheckError = downErr.Error()
		}
		if sum.After, err = r.stateCounts(ctx); err != nil {
			errs = append(errs, fmt.Sprintf("counting the state after the restart: %v", err))
		}
	}
	sum.Servers = rc.Servers.restartLogs(offsets, began)
	// A busy server may not answer Status.Leader within the poll's
	// timeout: its own log says when it took leadership.
	for _, sr := range sum.Servers {
		if sr.Leaderships > 0 && (sum.LeaderMS == 0 || sr.LeaderMS < sum.LeaderMS) {
			sum.LeaderMS = sr.LeaderMS
		}
	}
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "sim: servers restarted: leader after %.0f ms, ready after %.0f ms, %d of %d nodes back after %.0f ms\n",
			sum.LeaderMS, sum.ReadyMS, back, len(live), sum.AllNodesMS)
	}
}

// restartDone completes the restart's summary once the run has ended and
// every node's re-registrations are counted (r.rereg).
func (r *Run) restartDone() {
	if r.restart != nil && r.restart.NodesLive > 0 {
		r.restart.Reregistrations = r.rereg - r.reregBefore
	}
}

// watchReturn polls, every 20 ms, the servers for a leader and the nodes
// for a heartbeat answered after exited (when the servers had all
// exited), until every live node is back or ctx ends. It returns when a leader was first named, when the first node
// heartbeat was answered and how many live nodes are back (r.allBackAt
// is when the last one was). A node's answer is seen within 20 ms of it:
// heartbeat intervals are far longer.
func (r *Run) watchReturn(ctx context.Context, addrs []string, live []*Node, exited time.Time) (leader, ready time.Time, back int) {
	clients := make([]*wrpc.Client, len(addrs))
	for i, a := range addrs {
		clients[i] = wrpc.NewClient([]string{a}, nil)
		defer clients[i].Close()
	}
	returned := make([]bool, len(live))
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	lastProgress := time.Now()
	for {
		if leader.IsZero() {
			for _, c := range clients {
				var resp wrpc.LeaderResponse
				callCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				err := c.Call(callCtx, "Status.Leader", &wrpc.RequestHeader{}, &resp)
				cancel()
				if err == nil && resp.ID != "" {
					leader = time.Now()
					break
				}
			}
		}
		for i, n := range live {
			if returned[i] {
				continue
			}
			if at := n.LastHeartbeat(); at.After(exited) {
				returned[i] = true
				back++
				if ready.IsZero() || at.Before(ready) {
					ready = at
				}
				if at.After(r.allBackAt) {
					r.allBackAt = at
				}
			}
		}
		if back == len(live) {
			return leader, ready, back
		}
		if now := time.Now(); r.cfg.Progress != nil && now.Sub(lastProgress) >= r.cfg.ProgressEvery {
			lastProgress = now
			fmt.Fprintf(r.cfg.Progress, "sim: %.0f s after the servers exited: leader named: %v; %d of %d nodes heartbeating again\n",
				now.Sub(exited).Seconds(), !leader.IsZero(), back, len(live))
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return leader, ready, back
		}
	}
}

// stateCounts asks the leader how big its state is: Status.Cluster for the
// nodes and the applied index, App.List for the apps and their
// containers (one line per app, however many containers it has).
func (r *Run) stateCounts(ctx context.Context) (StateCounts, error) {
	c := wrpc.NewClient(r.cfg.Servers, nil)
	defer c.Close()
	c.AttemptTimeout = 30 * time.Second
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	began := time.Now()
	var st wrpc.ClusterStatus
	if err := c.Call(ctx, "Status.Cluster", &wrpc.RequestHeader{}, &st); err != nil {
		return StateCounts{}, err
	}
	var apps wrpc.AppListResponse
	if err := c.Call(ctx, "App.List", &wrpc.AppListRequest{}, &apps); err != nil {
		return StateCounts{}, err
	}
	out := StateCounts{Nodes: st.Nodes.Ready + st.Nodes.Draining + st.Nodes.Down, NodesDown: st.Nodes.Down,
		Apps: len(apps.Apps), Index: st.Raft.AppliedIndex}
	for _, a := range apps.Apps {
		out.Containers += a.Containers.Allocated + a.Containers.Queued + a.Containers.Running + a.Containers.Completed
		if a.State == string(scheduler.AppFinished) {
			out.AppsFinished++
		}
	}
	out.TookMS = ms(time.Since(began))
	return out, nil
}

// heartbeatFailures returns how many heartbeats have failed so far.
func (r *Run) heartbeatFailures() uint64 {
	r.stats.mu.Lock()
	defer r.stats.mu.Unlock()
	return r.stats.heartbeatFailures
}

// Text renders the restart's figures for people.
func (s *RestartSummary) Text() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("restart:     every server stopped with %s %.0f s into the run", s.Signal, s.AtSeconds)
	p("  state:     before %s", s.Before)
	p("             after  %s", s.After)
	p("  from the signal: all exited %.0f ms, leader elected %.0f ms, leader ready (first heartbeat answered) %.0f ms, all %d nodes heartbeating %.0f ms (%d back)",
		s.StoppedMS, s.LeaderMS, s.ReadyMS, s.NodesLive, s.AllNodesMS, s.NodesBack)
	down := fmt.Sprint(s.SpuriousDown)
	if s.DownCheckError != "" {
		down = "unknown (" + s.DownCheckError + ")"
	}
	p("  nodes:     %d heartbeats failed meanwhile; spurious DOWN %s; re-registrations asked %d", s.HeartbeatsFailed, down, s.Reregistrations)
	for _, sr := range s.Servers {
		line := fmt.Sprintf("  %s: snapshot at index %d (%d bytes) restored in %.0f ms (%d containers); serving at %.0f ms",
			sr.ID, sr.SnapshotIndex, sr.SnapshotBytes, sr.RestoreMS, sr.Containers, sr.StartedMS)
		if sr.Leaderships > 0 {
			line += fmt.Sprintf("; first led at %.0f ms (%d leaderships)", sr.LeaderMS, sr.Leaderships)
		}
		if sr.ReadyIndex > 0 {
			line += fmt.Sprintf(", first ready at %.0f ms at index %d (%d entries after the snapshot)",
				sr.ReadyMS, sr.ReadyIndex, sr.ReadyIndex-min(sr.ReadyIndex, sr.SnapshotIndex))
		}
		p("%s", line)
	}
	if s.Error != "" {
		p("  not measured: %s", s.Error)
	}
	return b.String()
}

// String describes the counts in one line.
func (c StateCounts) String() string {
	return fmt.Sprintf("%d nodes (%d DOWN), %d apps (%d finished), %d containers, applied index %d (counted in %.0f ms)",
		c.Nodes, c.NodesDown, c.Apps, c.AppsFinished, c.Containers, c.Index, c.TookMS)
}

// signalName names the signals a restart uses as people know them.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}
