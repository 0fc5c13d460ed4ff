package scheduler

// LocalScheduler is an agent's container scheduler (SPEC §10, seed 000):
// it decides which arriving containers start at once, which opportunistic
// ones wait in the node's FIFO queue, which running opportunistic ones are
// evicted to make room for a guaranteed arrival, and which queued ones are
// rejected or shed. It does no I/O: each call returns the Actions the agent
// must carry out, and the agent reports back with Finished when a process
// has really exited. It is not safe for concurrent use.
type LocalScheduler struct {
	capacity   Resources
	queueLimit int

	used     Resources // running and being-killed containers
	running  []*localEntry
	pendingG []*localEntry // guaranteed, waiting for evicted containers to exit
	queue    []*localEntry // opportunistic FIFO
	byID     map[string]*localEntry
}

// LocalContainer is a container as the local scheduler sees it.
type LocalContainer struct {
	ID            string
	Resources     Resources
	ExecutionType ExecutionType
}

type localState uint8

const (
	localQueued localState = iota
	localPendingG
	localRunning
	localKilling
)

type localEntry struct {
	c        LocalContainer
	state    localState
	promoted bool
}

// Stop is a container to stop, with the reason it will complete with.
type Stop struct {
	ID     string
	Reason ExitReason
}

// Actions are what the agent must do after a LocalScheduler call: start
// these containers' processes, kill these running processes (and call
// Finished when each exits), and report these never-started containers as
// completed without running them.
type Actions struct {
	Start []string
	Kill  []Stop
	Drop  []Stop
}

func (a *Actions) merge(b Actions) {
	a.Start = append(a.Start, b.Start...)
	a.Kill = append(a.Kill, b.Kill...)
	a.Drop = append(a.Drop, b.Drop...)
}

// NewLocalScheduler returns a scheduler for a node of the given capacity
// whose opportunistic queue holds at most queueLimit containers (0: never
// queue, reject instead).
func NewLocalScheduler(capacity Resources, queueLimit int) *LocalScheduler {
	return &LocalScheduler{capacity: capacity, queueLimit: queueLimit, byID: map[string]*localEntry{}}
}

func (s *LocalScheduler) free() Resources { return s.capacity.Sub(s.used) }

func (s *LocalScheduler) start(e *localEntry) {
	e.state = localRunning
	s.used = s.used.Add(e.c.Resources)
	s.running = append(s.running, e)
}

// Submit takes an arriving container. One larger than the node is
// rejected. A container that fits starts at once. A guaranteed one that does not fit evicts running opportunistic
// containers, most recently started first, until it will fit, and starts
// when they have exited. An opportunistic one that does not fit (or would
// jump a queue) waits in the FIFO queue, or is rejected if the queue is full.
func (s *LocalScheduler) Submit(c LocalContainer) Actions {
	var act Actions
	if _, dup := s.byID[c.ID]; dup {
		return act
	}
	if !c.Resources.Fits(s.capacity) {
		// It could never run here, and would block the queue behind it.
		act.Drop = append(act.Drop, Stop{c.ID, ReasonRejected})
		return act
	}
	e := &localEntry{c: c}
	s.byID[c.ID] = e
	if c.ExecutionType == Guaranteed {
		if len(s.pendingG) == 0 && c.Resources.Fits(s.free()) {
			s.start(e)
			act.Start = append(act.Start, c.ID)
			return act
		}
		e.state = localPendingG
		s.pendingG = append(s.pendingG, e)
		act.Kill = s.evictFor()
		return act
	}
	if len(s.pendingG) == 0 && len(s.queue) == 0 && c.Resources.Fits(s.free()) {
		s.start(e)
		act.Start = append(act.Start, c.ID)
		return act
	}
	if len(s.queue) >= s.queueLimit {
		delete(s.byID, c.ID)
		act.Drop = append(act.Drop, Stop{c.ID, ReasonRejected})
		return act
	}
	e.state = localQueued
	s.queue = append(s.queue, e)
	return act
}

// evictFor picks running opportunistic containers to kill, newest first,
// until every waiting guaranteed container will fit once the killed ones
// (and those already being killed) have exited.
func (s *LocalScheduler) evictFor() []Stop {
	var need Resources
	for _, g := range s.pendingG {
		need = need.Add(g.c.Resources)
	}
	avail := s.free()
	for _, e := range s.running {
		if e.state == localKilling {
			avail = avail.Add(e.c.Resources)
		}
	}
	var kills []Stop
	for i := len(s.running) - 1; i >= 0 && !need.Fits(avail); i-- {
		e := s.running[i]
		if e.state != localRunning || e.c.ExecutionType != Opportunistic || e.promoted {
			continue
		}
		e.state = localKilling
		avail = avail.Add(e.c.Resources)
		kills = append(kills, Stop{e.c.ID, ReasonEvicted})
	}
	return kills
}

// Finished records that a started container's process has exited (by
// itself or killed) and starts what now fits: waiting guaranteed
// containers first, then the opportunistic queue in FIFO order.
func (s *LocalScheduler) Finished(id string) Actions {
	e, ok := s.byID[id]
	if !ok || (e.state != localRunning && e.state != localKilling) {
		return Actions{}
	}
	delete(s.byID, id)
	s.used = s.used.Sub(e.c.Resources)
	for i, r := range s.running {
		if r == e {
			s.running = append(s.running[:i], s.running[i+1:]...)
			break
		}
	}
	return s.drain()
}

func (s *LocalScheduler) drain() Actions {
	var act Actions
	for len(s.pendingG) > 0 && s.pendingG[0].c.Resources.Fits(s.free()) {
		e := s.pendingG[0]
		s.pendingG = s.pendingG[1:]
		s.start(e)
		act.Start = append(act.Start, e.c.ID)
	}
	if len(s.pendingG) > 0 {
		return act // opportunistic work never jumps a waiting guaranteed container
	}
	for len(s.queue) > 0 && s.queue[0].c.Resources.Fits(s.free()) {
		e := s.queue[0]
		s.queue = s.queue[1:]
		s.start(e)
		act.Start = append(act.Start, e.c.ID)
	}
	return act
}

// Stop handles a request (from the AM, a user or the leader) to stop a
// container: a queued or waiting one is dropped at once, a running one
// must be killed by the agent, which then calls Finished.
func (s *LocalScheduler) Stop(id string, reason ExitReason) Actions {
	var act Actions
	e, ok := s.byID[id]
	if !ok {
		return act
	}
	switch e.state {
	case localQueued:
		s.queue = removeEntry(s.queue, e)
		delete(s.byID, id)
		act.Drop = append(act.Drop, Stop{id, reason})
	case localPendingG:
		s.pendingG = removeEntry(s.pendingG, e)
		delete(s.byID, id)
		act.Drop = append(act.Drop, Stop{id, reason})
		act.merge(s.drain())
	case localRunning:
		e.state = localKilling
		act.Kill = append(act.Kill, Stop{id, reason})
	}
	return act
}

func removeEntry(list []*localEntry, e *localEntry) []*localEntry {
	for i, x := range list {
		if x == e {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// Shed drops the newest queued opportunistic containers until at most
// limit are queued (SPEC §10 queue rebalancing).
func (s *LocalScheduler) Shed(limit int) Actions {
	var act Actions
	for len(s.queue) > limit && len(s.queue) > 0 {
		e := s.queue[len(s.queue)-1]
		s.queue = s.queue[:len(s.queue)-1]
		delete(s.byID, e.c.ID)
		act.Drop = append(act.Drop, Stop{e.c.ID, ReasonShed})
	}
	return act
}

// Promote makes a running opportunistic container guaranteed: it is no
// longer evicted for guaranteed arrivals. It reports whether id was a
// running opportunistic container.
func (s *LocalScheduler) Promote(id string) bool {
	e, ok := s.byID[id]
	if !ok || e.state != localRunning || e.c.ExecutionType != Opportunistic {
		return false
	}
	e.promoted = true
	e.c.ExecutionType = Guaranteed
	return true
}

// Demote undoes a promotion the servers do not hold: the container is
// opportunistic and evictable again. It reports whether id was a running
// promoted container.
func (s *LocalScheduler) Demote(id string) bool {
	e, ok := s.byID[id]
	if !ok || (e.state != localRunning && e.state != localKilling) || !e.promoted {
		return false
	}
	e.promoted = false
	e.c.ExecutionType = Opportunistic
	return true
}

// LocalLoad summarises the node for heartbeats. Queued counts the
// opportunistic queue only: a guaranteed container waiting for evictions
// starts as soon as they exit.
type LocalLoad struct {
	RunningGuaranteed    int
	RunningOpportunistic int
	Queued               int
	Used                 Resources
	UsedOpportunistic    Resources
}

// Load reports what runs and waits on the node.
func (s *LocalScheduler) Load() LocalLoad {
	l := LocalLoad{Queued: len(s.queue), Used: s.used}
	for _, e := range s.running {
		if e.c.ExecutionType == Opportunistic {
			l.RunningOpportunistic++
			l.UsedOpportunistic = l.UsedOpportunistic.Add(e.c.Resources)
		} else {
			l.RunningGuaranteed++
		}
	}
	return l
}
