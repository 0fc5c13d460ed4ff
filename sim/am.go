package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// amAllocateWait is how long one AM.Allocate may block for news.
const amAllocateWait = 5 * time.Second

// AMConfig describes one simulated AM attempt.
type AMConfig struct {
	Job    Job
	Launch wrpc.AMLaunch
	// Servers are the servers' RPC addresses: a simulated AM talks to them
	// directly, as an AM without an AMRMProxy does.
	Servers []string
	// Node finds a simulated node by ID, to start containers on.
	Node   func(id string) *Node
	Stats  *Stats
	Logger hclog.Logger
}

// amTask is one task's progress.
type amTask struct {
	task      Task
	ask       uint64 // the ask it is wanted under
	container string // current container, if any
	askedAt   time.Time
	done      bool
}

// AM is a simulated application master: it registers with the token its
// launch carried, asks for a container per task over the real AM protocol
// (one ask per distinct resources, type and priority), records how long
// each ask took to be allocated, starts the containers on their simulated
// nodes for the task's duration, asks again for work taken away
// (preempted, lost, evicted) and finishes the app when every task has
// completed.
type AM struct {
	cfg    AMConfig
	client *wrpc.Client
	token  string
	index  uint64
	tasks  []amTask
	byCID  map[string]int
	asks   []scheduler.Ask
	seen   map[string]bool
}

// NewAM returns the AM of a launch; Run drives it.
func NewAM(cfg AMConfig) *AM {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	a := &AM{cfg: cfg, client: wrpc.NewClient(cfg.Servers, wrpc.NewPool(nil)), token: cfg.Launch.Token,
		byCID: map[string]int{}, seen: map[string]bool{}}
	a.client.RetryBudget = time.Minute
	ids := map[string]uint64{}
	for _, t := range cfg.Job.Tasks {
		k := fmt.Sprintf("%s/%s/%d", t.Resources, t.ExecutionType, t.Priority)
		id, ok := ids[k]
		if !ok {
			id = uint64(len(a.asks) + 1)
			ids[k] = id
			a.asks = append(a.asks, scheduler.Ask{AskID: id, Resources: t.Resources, ExecutionType: t.ExecutionType, Priority: t.Priority})
		}
		a.tasks = append(a.tasks, amTask{task: t, ask: id})
	}
	return a
}

// Run registers, drives the app's tasks to their end and finishes the app.
// It returns when the app ends or ctx does.
func (a *AM) Run(ctx context.Context) error {
	defer a.client.Close()
	l := a.cfg.Launch.Container
	var reg wrpc.AMRegisterResponse
	if err := a.client.Call(ctx, "AM.Register", &wrpc.AMRegisterRequest{AppID: l.AppID, Attempt: l.Attempt, Token: a.token}, &reg); err != nil {
		return err
	}
	var releases []string
	for {
		now := time.Now()
		asks := make([]scheduler.Ask, len(a.asks))
		copy(asks, a.asks)
		byAsk := map[uint64]int{}
		for i := range a.tasks {
			t := &a.tasks[i]
			if !t.done && t.container == "" {
				if t.askedAt.IsZero() {
					t.askedAt = now
				}
				byAsk[t.ask]++
			}
		}
		for i := range asks {
			asks[i].Count = byAsk[asks[i].AskID]
		}
		req := &wrpc.AMAllocateRequest{AppID: l.AppID, Attempt: l.Attempt, Token: a.token, Asks: asks, Releases: releases,
			Progress: a.progress()}
		req.MinQueryIndex, req.MaxWait = a.index, amAllocateWait
		var resp wrpc.AMAllocateResponse
		if err := a.client.Call(ctx, "AM.Allocate", req, &resp); err != nil {
			if errors.Is(err, wrpc.ErrStale) || ctx.Err() != nil {
				return err
			}
			a.cfg.Logger.Warn("allocate failed; retrying", "app", l.AppID, "error", err)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		releases = nil
		a.index = max(a.index, resp.Index)
		if resp.AMToken != "" {
			a.token = resp.AMToken
		}
		if scheduler.AppState(resp.AppState).Terminal() {
			a.end(false)
			return nil
		}
		for _, c := range resp.Allocated {
			releases = append(releases, a.assign(c)...)
		}
		for _, c := range resp.Completed {
			a.completed(c)
		}
		if a.finished() {
			return a.finish(ctx)
		}
	}
}

// assign gives an allocated container to a task of its ask and starts it
// on its node; a container no task needs is returned for release.
func (a *AM) assign(c wrpc.ContainerInfo) []string {
	if a.seen[c.ID] {
		return nil
	}
	a.seen[c.ID] = true
	now := time.Now()
	for i := range a.tasks {
		t := &a.tasks[i]
		if t.done || t.container != "" || t.ask != c.AskID {
			continue
		}
		node := a.cfg.Node(c.NodeID)
		if node == nil {
			return []string{c.ID}
		}
		a.cfg.Stats.Allocated(now.Sub(t.askedAt), c.ExecutionType == string(scheduler.Opportunistic))
		t.container, t.askedAt = c.ID, time.Time{}
		a.byCID[c.ID] = i
		if node.Start(c, t.task.Duration, nil) == scheduler.ContainerCompleted {
			// Turned away (an opportunistic container its node could not
			// queue): its completion reaches the servers in the node's
			// next heartbeat and the task is asked for again then.
			a.cfg.Logger.Debug("node turned a container away", "container", c.ID)
		}
		return nil
	}
	return []string{c.ID}
}

// completed records a container's end: the task is done, or asked for
// again if its container was taken away.
func (a *AM) completed(c wrpc.ContainerInfo) {
	i, ok := a.byCID[c.ID]
	if !ok {
		return
	}
	delete(a.byCID, c.ID)
	t := &a.tasks[i]
	t.container = ""
	if scheduler.ExitReason(c.Reason).Retryable() {
		return
	}
	t.done = true
	a.cfg.Stats.TaskDone()
}

func (a *AM) finished() bool {
	for _, t := range a.tasks {
		if !t.done {
			return false
		}
	}
	return true
}

func (a *AM) progress() float32 {
	done := 0
	for _, t := range a.tasks {
		if t.done {
			done++
		}
	}
	return float32(done) / float32(max(1, len(a.tasks)))
}

// finish ends the app FINISHED, then its AM container.
func (a *AM) finish(ctx context.Context) error {
	l := a.cfg.Launch.Container
	var resp wrpc.WriteResponse
	err := a.client.Call(ctx, "AM.Finish", &wrpc.AMFinishRequest{AppID: l.AppID, Attempt: l.Attempt, Token: a.token,
		FinalState: string(scheduler.AppFinished), Diagnostics: "simulated"}, &resp)
	a.end(err == nil)
	return err
}

// end records the app's end and completes the AM's container.
func (a *AM) end(ok bool) {
	done := 0
	for _, t := range a.tasks {
		if t.done {
			done++
		}
	}
	a.cfg.Stats.AppEnded(len(a.tasks), done, ok)
	if n := a.cfg.Node(a.cfg.Launch.Container.NodeID); n != nil {
		n.Finish(a.cfg.Launch.Container.ID)
	}
}
