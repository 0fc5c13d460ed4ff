package server

import (
	"sync"
	"time"

	"github.com/weft-sched/weft/fsm"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Node liveness settings (SPEC §12).
const (
	// DefaultNodeTTL is how long a node may go without a heartbeat.
	DefaultNodeTTL = 10 * time.Second
	// ContainerStartTimeout is how long an allocation may wait to be started.
	ContainerStartTimeout = 10 * time.Minute
)

// liveness is the leader's memory of when each node last heartbeated and
// what load it reported. It is not replicated: a new leader starts every
// node's clock afresh (the grace period of SPEC §13).
type liveness struct {
	mu    sync.Mutex
	nodes map[string]*nodeSeen
}

type nodeSeen struct {
	epoch    uint64
	last     time.Time
	load     wrpc.NodeLoad
	reported bool // a heartbeat has reported load at this epoch
}

func newLiveness() *liveness { return &liveness{nodes: map[string]*nodeSeen{}} }

func (l *liveness) seen(id string, epoch uint64, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, ok := l.nodes[id]
	if !ok || n.epoch != epoch {
		n = &nodeSeen{}
		l.nodes[id] = n
	}
	n.epoch, n.last = epoch, at
}

func (l *liveness) setLoad(id string, load wrpc.NodeLoad) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n, ok := l.nodes[id]; ok {
		n.load, n.reported = load, true
	}
}

// queueWait returns the queue wait a node last estimated.
func (l *liveness) queueWait(id string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n, ok := l.nodes[id]; ok {
		return n.load.EstimatedQueueWait
	}
	return 0
}

// loads returns the last load each node reported at its current epoch;
// nodes that have not reported one yet are left out.
func (l *liveness) loads() map[string]wrpc.NodeLoad {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]wrpc.NodeLoad, len(l.nodes))
	for id, n := range l.nodes {
		if n.reported {
			out[id] = n.load
		}
	}
	return out
}

// reset starts every node's clock at now and forgets their loads, which
// may be a term old: called when leadership begins.
func (l *liveness) reset(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.nodes {
		n.last = now
		n.load, n.reported = wrpc.NodeLoad{}, false
	}
}

// expired returns the READY nodes of st whose last heartbeat (at their
// current epoch) is older than ttl. A node never seen by this leader gets
// its clock started now.
func (l *liveness) expired(st *fsm.State, now time.Time, ttl time.Duration) []*scheduler.Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*scheduler.Node
	for _, n := range st.Nodes() {
		if n.Status == scheduler.NodeDown {
			continue
		}
		seen, ok := l.nodes[n.ID]
		if !ok || seen.epoch != n.Epoch {
			l.nodes[n.ID] = &nodeSeen{epoch: n.Epoch, last: now}
			continue
		}
		if now.Sub(seen.last) > ttl {
			out = append(out, n)
		}
	}
	return out
}

// livenessLoop runs on the leader: it marks nodes DOWN whose heartbeats
// stopped, and expires allocations never started in time.
func (s *Server) livenessLoop(stopCh chan struct{}) {
	s.liveness.reset(time.Now())
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-stopCh:
			return
		}
		now := time.Now()
		st := s.fsm.State()
		for _, n := range s.liveness.expired(st, now, s.config.NodeTTL) {
			s.markNodeDown(n, "no heartbeat for "+s.config.NodeTTL.String())
		}
		var expired []string
		for _, n := range st.Nodes() {
			for _, c := range st.NodeLiveContainers(n.ID) {
				if c.State == scheduler.ContainerAllocated && !c.IsAM && now.Sub(time.Unix(0, c.AllocatedAt)) > ContainerStartTimeout {
					expired = append(expired, c.ID)
				}
			}
		}
		if len(expired) > 0 {
			if _, _, err := s.raftApply(fsm.ContainerStopType, &fsm.ContainerStopRequest{IDs: expired, Reason: scheduler.ReasonExpired, Now: now.UnixNano()}); err != nil {
				s.logger.Error("expire unstarted containers", "error", err)
			}
		}
	}
}

// markNodeDown records a node DOWN at its current epoch: its containers are
// lost and their AMs hear of it through Allocate.
func (s *Server) markNodeDown(n *scheduler.Node, reason string) {
	s.logger.Warn("marking node down", "node", n.ID, "epoch", n.Epoch, "reason", reason)
	_, _, err := s.raftApply(fsm.NodeStatusType, &fsm.NodeStatusRequest{
		ID: n.ID, Epoch: n.Epoch, Status: scheduler.NodeDown, Reason: reason, Now: time.Now().UnixNano(),
	})
	if err != nil {
		s.logger.Error("mark node down", "node", n.ID, "error", err)
	}
}
