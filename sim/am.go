package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	// directly when its node has no AMRMProxy, and carries what its
	// node's proxy forwards when it has one.
	Servers []string
	// Node finds a simulated node by ID, to start containers on.
	Node   func(id string) *Node
	Stats  *Stats
	Logger hclog.Logger
	// Heartbeat, if set, makes the AM allocate as YARN's AMs do: one
	// AM.Allocate every Heartbeat that never blocks for news, instead of a
	// call that blocks until something changes.
	Heartbeat time.Duration
	// NoTurnAwayFeedback keeps the AMRMProxy from hearing that a node
	// turned a container away (to measure what hearing it brings).
	NoTurnAwayFeedback bool
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
// (one ask per distinct resources, type and priority), through its node's
// AMRMProxy when the node has one, records how long each ask took to be
// allocated (by kind: guaranteed, opportunistic at the proxy or at the
// leader), starts the containers on their simulated
// nodes for the task's duration, asks again for work taken away
// (preempted, lost, evicted) and finishes the app when every task has
// completed.
type AM struct {
	cfg    AMConfig
	client *wrpc.Client
	// proxy is the AMRMProxy of the AM's node, nil if it has none: then
	// the AM asks the servers directly.
	proxy *Proxy
	// relays are the proxy's background relays to the servers in flight.
	relays  sync.WaitGroup
	mu      sync.Mutex
	renewed string // an AM token a relay brought back
	token   string
	index   uint64
	tasks   []amTask
	byCID   map[string]int
	asks    []scheduler.Ask
	seen    map[string]bool
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
	defer a.relays.Wait()
	l := a.cfg.Launch.Container
	if n := a.cfg.Node(l.NodeID); n != nil {
		a.proxy = n.Proxy()
	}
	var reg wrpc.AMRegisterResponse
	if err := a.client.Call(ctx, "AM.Register", &wrpc.AMRegisterRequest{AppID: l.AppID, Attempt: l.Attempt, Token: a.token}, &reg); err != nil {
		return err
	}
	var releases []string
	var tick *time.Ticker
	if a.cfg.Heartbeat > 0 {
		tick = time.NewTicker(a.cfg.Heartbeat)
		defer tick.Stop()
	}
	for first := true; ; first = false {
		if tick != nil && !first {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
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
		if tick != nil {
			req.MaxWait = time.Millisecond // the AM's heartbeat: never wait for news
		}
		var resp wrpc.AMAllocateResponse
		local, err := a.allocate(ctx, req, &resp)
		if err != nil {
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
			releases = append(releases, a.assign(c, local)...)
		}
		for _, c := range resp.Completed {
			a.completed(c)
		}
		if a.finished() {
			return a.finish(ctx)
		}
	}
}

// allocate makes one AM.Allocate call: to the servers, or through the
// node's AMRMProxy, which answers at once with what it allocated (the rest
// relayed to the servers in the background, as an agent's proxy does) and
// otherwise forwards the call, waiting no longer than a heartbeat interval
// when opportunistic demand wants the room the next list brings. local
// says the answer came from the proxy.
func (a *AM) allocate(ctx context.Context, req *wrpc.AMAllocateRequest, resp *wrpc.AMAllocateResponse) (local bool, err error) {
	if a.proxy == nil {
		return false, a.client.Call(ctx, "AM.Allocate", req, resp)
	}
	l := a.cfg.Launch.Container
	renewed := a.proxy.Renewed()
	s := a.proxy.Split(req)
	if len(s.Local) > 0 {
		if s.NeedServers {
			fwd := s.Forward
			fwd.MaxWait = time.Millisecond
			a.relays.Add(1)
			go func() {
				defer a.relays.Done()
				relayCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				var r wrpc.AMAllocateResponse
				if err := a.client.Call(relayCtx, "AM.Allocate", &fwd, &r); err != nil {
					a.cfg.Logger.Debug("relay to the servers failed; the AM's next call asks again", "app", l.AppID, "error", err)
					return
				}
				a.mu.Lock()
				if r.AMToken != "" {
					a.renewed = r.AMToken
				}
				a.mu.Unlock()
				a.proxy.Synced(l.AppID, l.Attempt, &r)
			}()
		}
		*resp = wrpc.AMAllocateResponse{Index: req.MinQueryIndex, Allocated: s.Local}
		a.mu.Lock()
		resp.AMToken, a.renewed = a.renewed, ""
		a.mu.Unlock()
		return true, nil
	}
	fwd := s.Forward
	if s.Unmet && a.cfg.Heartbeat == 0 && (fwd.MaxWait <= 0 || fwd.MaxWait > a.heartbeat()) {
		fwd.MaxWait = a.heartbeat() // fresh room comes with the next list
		// Or sooner, as an agent's proxy: the window the leader grows for
		// the demand in the answer to the heartbeat the proxy poked.
		return a.waitForRoomOrServers(ctx, req, &fwd, renewed, resp)
	}
	if err := a.client.Call(ctx, "AM.Allocate", &fwd, resp); err != nil {
		return false, err
	}
	a.proxy.Synced(l.AppID, l.Attempt, resp)
	return false, nil
}

// waitForRoomOrServers sends fwd to the servers and waits for their
// answer or a renewed room, as an agent's AMRMProxy does: room renewed
// first that now holds req's opportunistic asks is the answer at once (the
// servers' answer is then taken in the background, a renewed token kept
// for the next call); otherwise the servers' answer is.
func (a *AM) waitForRoomOrServers(ctx context.Context, req, fwd *wrpc.AMAllocateRequest, renewed <-chan struct{}, resp *wrpc.AMAllocateResponse) (bool, error) {
	l := a.cfg.Launch.Container
	var answer wrpc.AMAllocateResponse
	var callErr error
	done := make(chan struct{})
	var mu sync.Mutex
	abandoned, finished := false, false
	take := func() { // the servers' answer, which no AM gets now
		if callErr != nil {
			return
		}
		a.mu.Lock()
		if answer.AMToken != "" {
			a.renewed = answer.AMToken
		}
		a.mu.Unlock()
		a.proxy.Synced(l.AppID, l.Attempt, &answer)
	}
	a.relays.Add(1)
	go func() {
		defer a.relays.Done()
		callErr = a.client.Call(ctx, "AM.Allocate", fwd, &answer)
		mu.Lock()
		finished = true
		gone := abandoned
		mu.Unlock()
		if gone {
			take()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-renewed:
		again := *req
		again.Releases, again.Promotions = nil, nil // the first split took them
		if s := a.proxy.Split(&again); len(s.Local) > 0 {
			mu.Lock()
			abandoned = true
			fin := finished
			mu.Unlock()
			if fin { // answered meanwhile: taken here
				<-done
				take()
			}
			*resp = wrpc.AMAllocateResponse{Index: req.MinQueryIndex, Allocated: s.Local}
			a.mu.Lock()
			resp.AMToken, a.renewed = a.renewed, ""
			a.mu.Unlock()
			return true, nil
		}
		<-done
	}
	if callErr != nil {
		return false, callErr
	}
	*resp = answer
	a.proxy.Synced(l.AppID, l.Attempt, resp)
	return false, nil
}

func (a *AM) heartbeat() time.Duration { return a.proxy.node.cfg.Heartbeat }

// assign gives an allocated container to a task of its ask and starts it
// on its node; a container no task needs is returned for release. atProxy
// says the AMRMProxy allocated it.
func (a *AM) assign(c wrpc.ContainerInfo, atProxy bool) []string {
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
		kind := allocGuaranteed
		if c.ExecutionType == string(scheduler.Opportunistic) {
			kind = allocOppCentral
			if atProxy {
				kind = allocOppProxy
			}
		}
		a.cfg.Stats.Allocated(now.Sub(t.askedAt), kind)
		t.container, t.askedAt = c.ID, time.Time{}
		a.byCID[c.ID] = i
		if atProxy {
			a.proxy.Started(c.AppID, c.Attempt, c.ID, node)
		}
		if node.Start(c, t.task.Duration, nil) == scheduler.ContainerCompleted {
			// Turned away (an opportunistic container its node could not
			// queue), as Container.Start answers: the task is asked for
			// again at once; the node reports the container's end to the
			// servers in its next heartbeat.
			a.cfg.Logger.Debug("node turned a container away", "container", c.ID)
			if atProxy && !a.cfg.NoTurnAwayFeedback {
				a.proxy.TurnedAway(c.NodeID)
			}
			delete(a.byCID, c.ID)
			t.container, t.askedAt = "", now
			a.cfg.Stats.TaskRetried(scheduler.ReasonRejected)
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
		a.cfg.Stats.TaskRetried(scheduler.ExitReason(c.Reason))
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
	if a.proxy != nil {
		a.proxy.Forget(l.AppID, l.Attempt)
	}
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
