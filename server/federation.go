package server

import (
	"context"
	"maps"
	"slices"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
)

// A sub-cluster's part in a federation (SPEC §18): with -subcluster-id,
// the leader reports the cluster to the routers every
// subcluster_heartbeat — its capacity, use and pending demand, each
// queue's fair share and load, its servers and racks — and refreshes its
// list of routers from their answer. The routers mark a sub-cluster LOST
// when the reports stop.

// federationLoop reports this sub-cluster to the routers while this
// server leads (a leader duty).
func (s *Server) federationLoop(ctx context.Context) {
	if s.config.SubclusterID == "" {
		return
	}
	tick := s.clock.NewTicker(s.config.SubclusterHeartbeat)
	defer tick.Stop()
	var seq uint64
	var held federation.State // as the routers last answered
	for {
		seq++
		s.reportToRouters(ctx, seq, &held)
		select {
		case <-tick.C():
		case <-ctx.Done():
			return
		}
	}
}

// reportToRouters sends one report, waiting at most one interval, and
// logs the state the routers hold the sub-cluster in when it changes.
func (s *Server) reportToRouters(ctx context.Context, seq uint64, held *federation.State) {
	callCtx, cancel := context.WithTimeout(ctx, s.config.SubclusterHeartbeat)
	defer cancel()
	req := &wrpc.FederationHeartbeatRequest{Report: s.subclusterReport(s.fsm.State(), seq)}
	var resp wrpc.FederationHeartbeatResponse
	if err := s.routers.Call(callCtx, "Federation.Heartbeat", req, &resp); err != nil {
		if ctx.Err() == nil {
			s.logger.Warn("could not report to the federation's routers", "subcluster", s.config.SubclusterID, "error", err)
		}
		return
	}
	if len(resp.Routers) > 0 {
		s.routers.SetServers(resp.Routers)
		if !slices.Equal(resp.Routers, s.agentFed.Load().Routers) {
			s.setAgentFederation(resp.Routers)
		}
	}
	if resp.State != *held {
		s.logger.Info("the federation's routers hold this sub-cluster", "subcluster", s.config.SubclusterID, "state", resp.State)
		*held = resp.State
	}
}

// subclusterReport is what the routers are told of the cluster in st.
func (s *Server) subclusterReport(st *fsm.State, seq uint64) wrpc.SubclusterReport {
	rep := wrpc.SubclusterReport{ID: s.config.SubclusterID, Servers: s.serverAddrs(), Leader: s.config.NodeID,
		Term: s.raft.CurrentTerm(), Seq: seq, Queues: map[string]*federation.QueueLoad{}}
	racks := map[string]bool{}
	for _, n := range st.Nodes() {
		rep.NodesTotal++
		if n.Status != scheduler.NodeReady {
			continue
		}
		rep.NodesReady++
		rep.Capacity = rep.Capacity.Add(n.Capacity)
		rep.Used = rep.Used.Add(n.AllocatedGuaranteed)
		if n.Rack != "" && len(racks) < maxReportedRacks {
			racks[n.Rack] = true
		}
	}
	rep.Racks = slices.Sorted(maps.Keys(racks))
	for _, a := range st.ActiveApps() {
		if a.Unmanaged != nil {
			rep.UnmanagedAMs++
		} else {
			rep.AppsRunning++
		}
	}
	stats := scheduler.QueueStats(st)
	for i, q := range st.Queues() {
		if i >= maxReportedQueues {
			break
		}
		stat := stats[q.Path]
		rep.Queues[q.Path] = &federation.QueueLoad{FairShare: stat.InstantaneousFairShare, Used: stat.Used, Pending: stat.Pending}
		if q.Path == scheduler.RootQueue {
			rep.Pending = stat.Pending
		}
	}
	switch {
	case !s.leaderReady.Load():
		rep.Reason = "the leader is not ready"
	case s.fsm.HaltErr() != nil:
		rep.Reason = "the state machine halted: " + s.fsm.HaltErr().Error()
	case rep.NodesReady == 0:
		rep.Reason = "no READY node"
	default:
		rep.Healthy = true
	}
	return rep
}

// setAgentFederation makes the federation agents are told of name
// routers: built once per change, every answer shares it.
func (s *Server) setAgentFederation(routers []string) {
	s.agentFed.Store(&wrpc.AgentFederation{Subcluster: s.config.SubclusterID, Routers: slices.Clone(routers)})
}

// The routers bound what one report may hold (router/fedstate).
const (
	maxReportedRacks  = 1024
	maxReportedQueues = 4096
)
