package sim

import (
	"testing"
	"time"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

func one(id string, et scheduler.ExecutionType) wrpc.ContainerInfo {
	return wrpc.ContainerInfo{ID: id, AppID: "app-1", Attempt: 1, AskID: 1, ExecutionType: string(et),
		Resources: scheduler.Resources{MemoryMB: 1024, Vcores: 1}}
}

func (n *Node) state(t *testing.T, id string) wrpc.ContainerReport {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.containers[id]
	if !ok {
		t.Fatalf("container %s is not on the node", id)
	}
	return c.report
}

// A simulated node runs what fits for its duration, queues opportunistic
// work that does not, evicts it for a guaranteed arrival, and reports
// every end as the agent would: exit 0 for a task that ran its course.
func TestNodeRunsQueuesAndEvictsLikeAnAgent(t *testing.T) {
	n, err := NewNode(NodeConfig{ID: "n1", Capacity: scheduler.Resources{MemoryMB: 2048, Vcores: 2}, Heartbeat: time.Second, QueueLength: 1})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1000, 0)
	if got := n.startLocked(one("g1", scheduler.Guaranteed), 3*time.Second, nil, start); got != scheduler.ContainerRunning {
		t.Fatalf("g1 %s, want RUNNING", got)
	}
	if got := n.startLocked(one("o1", scheduler.Opportunistic), 10*time.Second, nil, start); got != scheduler.ContainerRunning {
		t.Fatalf("o1 %s, want RUNNING", got)
	}
	if got := n.startLocked(one("o2", scheduler.Opportunistic), time.Second, nil, start); got != scheduler.ContainerQueued {
		t.Fatalf("o2 %s, want QUEUED: the node is full", got)
	}
	if got := n.startLocked(one("o3", scheduler.Opportunistic), time.Second, nil, start); got != scheduler.ContainerCompleted {
		t.Fatalf("o3 %s, want COMPLETED (rejected): the queue holds one", got)
	}
	if r := n.state(t, "o3"); r.Reason != scheduler.ReasonRejected {
		t.Errorf("o3 reason %s, want rejected", r.Reason)
	}
	// A guaranteed arrival on a full node evicts the running opportunistic
	// container; the queued one waits on.
	if got := n.startLocked(one("g2", scheduler.Guaranteed), 3*time.Second, nil, start); got != scheduler.ContainerRunning {
		t.Fatalf("g2 %s, want RUNNING after evicting o1", got)
	}
	if r := n.state(t, "o1"); r.State != scheduler.ContainerCompleted || r.Reason != scheduler.ReasonEvicted {
		t.Errorf("o1 %s %s, want COMPLETED evicted", r.State, r.Reason)
	}
	n.mu.Lock()
	n.completeDue(start.Add(2 * time.Second))
	n.mu.Unlock()
	if r := n.state(t, "g1"); r.State != scheduler.ContainerRunning {
		t.Fatalf("g1 %s before its 3 s were up", r.State)
	}
	n.mu.Lock()
	n.completeDue(start.Add(3 * time.Second))
	n.mu.Unlock()
	r := n.state(t, "g1")
	if r.State != scheduler.ContainerCompleted || r.Reason != scheduler.ReasonExited || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("g1 after 3 s: %+v, want COMPLETED exited 0", r)
	}
	if r := n.state(t, "o2"); r.State != scheduler.ContainerRunning {
		t.Errorf("o2 %s, want RUNNING once g1 and g2 left room", r.State)
	}
	// Acknowledged completions are forgotten; live containers are not.
	n.apply(&wrpc.HeartbeatResponse{Acked: []string{"g1", "o1", "o2"}}, start.Add(3*time.Second))
	n.mu.Lock()
	_, g1 := n.containers["g1"]
	_, o2 := n.containers["o2"]
	n.mu.Unlock()
	if g1 || !o2 {
		t.Errorf("after the acks: g1 kept %v (want false), o2 kept %v (want true)", g1, o2)
	}
}

// On a live node a container ends when its time is up, not at the next
// heartbeat, and the opportunistic container queued behind it starts at
// once: the queue's point for short tasks.
func TestLiveNodeStartsTheQueuedAsSoonAsRoomFrees(t *testing.T) {
	n, err := NewNode(NodeConfig{ID: "n1", Capacity: scheduler.Resources{MemoryMB: 1024, Vcores: 1}, Heartbeat: time.Hour, QueueLength: 1})
	if err != nil {
		t.Fatal(err)
	}
	n.live = true // as Run sets; no heartbeat ever comes
	ended := make(chan scheduler.ExitReason, 1)
	if got := n.Start(one("o1", scheduler.Opportunistic), 20*time.Millisecond, func(r scheduler.ExitReason) { ended <- r }); got != scheduler.ContainerRunning {
		t.Fatalf("o1 %s, want RUNNING", got)
	}
	if got := n.Start(one("o2", scheduler.Opportunistic), time.Hour, nil); got != scheduler.ContainerQueued {
		t.Fatalf("o2 %s, want QUEUED behind o1", got)
	}
	if r := <-ended; r != scheduler.ReasonExited {
		t.Fatalf("o1 ended %s, want exited", r)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if s := n.containers["o2"].report.State; s != scheduler.ContainerRunning {
		t.Errorf("o2 %s once o1 ended, want RUNNING", s)
	}
	n.containers["o2"].timer.Stop()
}

// The fill is measured from the first allocation, not from the start of
// the run, to the one that made 99%, in 10 ms ticks: allocations from
// 1.23 s to 1.73 s (and a straggler much later) fill in 0.5 s.
func TestFillIsMeasuredFromTheFirstAllocation(t *testing.T) {
	s := NewStats(time.Now())
	if w, rate := s.Fill(); w != 0 || rate != 0 {
		t.Fatalf("fill of nothing: %v, %v", w, rate)
	}
	s.ticks = make([]uint32, 500)
	for i := 123; i < 173; i++ {
		s.ticks[i] = 20 // 1,000 allocations over 50 ticks
	}
	s.ticks[499] = 1
	w, rate := s.Fill()
	if w != 500*time.Millisecond || rate != 1000/0.5 {
		t.Fatalf("fill: %v at %.1f/s; want 500ms, the 1,000 allocations in it over it", w, rate)
	}
}
