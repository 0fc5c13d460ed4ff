package scheduler

import (
	"fmt"
	"slices"
	"time"
)

// LocalScheduler is an agent's container scheduler (SPEC §10, §21, seed
// 000): it decides which arriving containers start at once, which
// opportunistic ones wait in the node's queue and in what order, which
// running opportunistic ones are evicted (killed, or paused) to make room
// for a guaranteed arrival, and which queued ones are rejected or shed. It
// does no I/O: each call returns the Actions the agent must carry out, and
// the agent reports back with Finished when a process has really exited.
// Decisions that depend on time (run time lost, aging, pauses) read the
// time the agent last gave SetTime. It is not safe for concurrent use.
type LocalScheduler struct {
	capacity   Resources
	queueLimit int
	policy     LocalPolicy
	now        time.Time

	used Resources // what running, being-killed and paused containers hold
	// use is the node's measured use as last reported (SetUsage), plus
	// what started since, less what ended: what overcommit goes by.
	use      Resources
	measured bool
	running  []*localEntry
	pendingG []*localEntry // guaranteed, waiting for evicted containers to exit
	queue    []*localEntry // opportunistic, in arrival order
	paused   []*localEntry // opportunistic, paused to make room, in pause order
	byID     map[string]*localEntry
	// runs is the moving average run time of each app's containers that
	// ran to their end here (the shortest_first policy's estimate when an
	// ask gives none); allRuns the same over every app.
	runs    map[string]time.Duration
	allRuns time.Duration
}

// LocalContainer is a container as the local scheduler sees it.
type LocalContainer struct {
	ID            string
	AppID         string
	Resources     Resources
	ExecutionType ExecutionType
	// Expected is how long the ask said it runs (0: not said).
	Expected time.Duration
	// Progress is how far its app was when it was started (0 to 1).
	Progress float64
}

// LocalHints gives c the hints its container carried from its ask and AM:
// the expected run time (kept within 0 and MaxExpectedDuration) and its
// app's progress (kept within 0 and 1; not a number is 0). They come from
// the network, from the AM: a node takes them as hints, never as limits.
func LocalHints(c LocalContainer, expected time.Duration, progress float32) LocalContainer {
	c.Expected = min(max(0, expected), MaxExpectedDuration)
	if p := float64(progress); p > 0 { // false for NaN
		c.Progress = min(p, 1)
	}
	return c
}

// The opportunistic queue's orders (opportunistic.queue_policy).
const (
	QueueFIFO              = "fifo"
	QueueShortestFirst     = "shortest_first"
	QueueNearestCompletion = "nearest_completion"
)

// Which running opportunistic containers a guaranteed arrival evicts
// (opportunistic.eviction).
const (
	EvictLeastWaste  = "least_waste"
	EvictNewestFirst = "newest_first"
)

// DefaultMaxPause is how long a paused container may stay paused.
const DefaultMaxPause = 5 * time.Minute

// LocalPolicy is how a node orders and evicts opportunistic containers.
type LocalPolicy struct {
	// QueuePolicy orders the queue: QueueFIFO ("" too), QueueShortestFirst
	// (the expected run time: the ask's, else the app's average here, else
	// every app's) or QueueNearestCompletion (the app's progress).
	QueuePolicy string
	// MaxQueueWait puts a container that has waited longer at the head,
	// the longest waiting first (0: never).
	MaxQueueWait time.Duration
	// Eviction picks the victims: EvictLeastWaste ("" too) or
	// EvictNewestFirst.
	Eviction string
	// Pause stops victims rather than killing them, when the guaranteed
	// arrival's memory fits beside theirs; they resume when room frees.
	// One paused longer than MaxPause (0: DefaultMaxPause) is killed.
	Pause    bool
	MaxPause time.Duration
	// Overcommit lets opportunistic containers start into capacity that
	// is allocated but idle, while the node's measured use stays under
	// these fractions of its capacity (YARN-1011). A fraction of 0 leaves
	// that resource to allocation alone; other resources always are.
	Overcommit Overcommit
}

// Overcommit is how far measured use may go, as fractions of capacity.
type Overcommit struct {
	MemoryMB float64
	Vcores   float64
}

// On says some resource is overcommitted.
func (o Overcommit) On() bool { return o.MemoryMB > 0 || o.Vcores > 0 }

// Limit is the measured use a node of capacity may reach (0 for a resource
// not overcommitted).
func (o Overcommit) Limit(capacity Resources) Resources {
	return Resources{MemoryMB: int64(o.MemoryMB * float64(capacity.MemoryMB)), Vcores: int64(o.Vcores * float64(capacity.Vcores))}
}

// Validate reports the first setting that is not one of its values, by
// its name in an agent's opportunistic block.
func (p LocalPolicy) Validate() error {
	switch {
	case p.QueuePolicy != "" && p.QueuePolicy != QueueFIFO && p.QueuePolicy != QueueShortestFirst && p.QueuePolicy != QueueNearestCompletion:
		return fmt.Errorf("opportunistic.queue_policy must be %q, %q or %q, not %q", QueueFIFO, QueueShortestFirst, QueueNearestCompletion, p.QueuePolicy)
	case p.MaxQueueWait < 0:
		return fmt.Errorf("opportunistic.max_queue_wait must not be negative")
	case p.Eviction != "" && p.Eviction != EvictLeastWaste && p.Eviction != EvictNewestFirst:
		return fmt.Errorf("opportunistic.eviction must be %q or %q, not %q", EvictLeastWaste, EvictNewestFirst, p.Eviction)
	case p.MaxPause < 0:
		return fmt.Errorf("opportunistic.max_pause must not be negative")
	case !(p.Overcommit.MemoryMB >= 0 && p.Overcommit.MemoryMB <= 1):
		return fmt.Errorf("opportunistic.overcommit.memory_mb must be a fraction of capacity between 0 and 1, not %v", p.Overcommit.MemoryMB)
	case !(p.Overcommit.Vcores >= 0 && p.Overcommit.Vcores <= 1):
		return fmt.Errorf("opportunistic.overcommit.vcores must be a fraction of capacity between 0 and 1, not %v", p.Overcommit.Vcores)
	}
	return nil
}

type localState uint8

const (
	localQueued localState = iota
	localPendingG
	localRunning
	localKilling
	localPaused
)

type localEntry struct {
	c        LocalContainer
	state    localState
	promoted bool
	held     Resources // what it holds of s.used
	since    time.Time // queued, started (or resumed) or paused at
	ran      time.Duration
}

// Stop is a container to stop, with the reason it will complete with.
type Stop struct {
	ID     string
	Reason ExitReason
}

// Actions are what the agent must do after a LocalScheduler call: start
// these containers' processes, kill these running (or paused) processes
// (and call Finished when each exits), report these never-started
// containers as completed without running them, stop (pause) these
// running processes and let these paused ones go on.
type Actions struct {
	Start  []string
	Kill   []Stop
	Drop   []Stop
	Pause  []string
	Resume []string
}

func (a *Actions) merge(b Actions) {
	a.Start = append(a.Start, b.Start...)
	a.Kill = append(a.Kill, b.Kill...)
	a.Drop = append(a.Drop, b.Drop...)
	a.Pause = append(a.Pause, b.Pause...)
	a.Resume = append(a.Resume, b.Resume...)
}

// NewLocalScheduler returns a scheduler for a node of the given capacity
// whose opportunistic queue holds at most queueLimit containers (0: never
// queue, reject instead).
func NewLocalScheduler(capacity Resources, queueLimit int) *LocalScheduler {
	return &LocalScheduler{capacity: capacity, queueLimit: queueLimit, byID: map[string]*localEntry{}, runs: map[string]time.Duration{}}
}

// SetPolicy sets how the queue is ordered and victims chosen.
func (s *LocalScheduler) SetPolicy(p LocalPolicy) {
	if p.MaxPause <= 0 {
		p.MaxPause = DefaultMaxPause
	}
	s.policy = p
}

// SetTime gives the time of the calls that follow.
func (s *LocalScheduler) SetTime(now time.Time) { s.now = now }

func (s *LocalScheduler) free() Resources { return s.capacity.Sub(s.used) }

func (s *LocalScheduler) hold(e *localEntry, r Resources) {
	s.used = s.used.Sub(e.held).Add(r)
	s.use = clampPositive(s.use.Sub(e.held).Add(r)) // until measured again
	e.held = r
}

// fitsOpportunistic says whether an opportunistic container of r may start
// now: into free capacity, or, overcommitting, into capacity allocated but
// idle while measured use stays within the policy's fractions.
func (s *LocalScheduler) fitsOpportunistic(r Resources) bool {
	if r.Fits(s.free()) {
		return true
	}
	o := s.policy.Overcommit
	if !o.On() || !s.measured {
		return false
	}
	limit, free := s.useLimit(), s.free()
	ok := func(f float64, want, use, lim, free int64) bool {
		if f > 0 {
			return use+want <= lim
		}
		return want <= free
	}
	if !ok(o.MemoryMB, r.MemoryMB, s.use.MemoryMB, limit.MemoryMB, free.MemoryMB) || !ok(o.Vcores, r.Vcores, s.use.Vcores, limit.Vcores, free.Vcores) {
		return false
	}
	for k, v := range r.Extended {
		if v > free.Extended[k] {
			return false
		}
	}
	return true
}

// useLimit is the measured use overcommit may reach.
func (s *LocalScheduler) useLimit() Resources { return s.policy.Overcommit.Limit(s.capacity) }

// SetUsage takes what the node's containers were measured to use. With
// overcommit on, opportunistic containers are paused (vcores over the
// limit, when the policy pauses) or killed (memory over it, or no pausing),
// least waste first, until the use is back under the limit; then what the
// measured room lets start, starts. Guaranteed containers are never taken.
func (s *LocalScheduler) SetUsage(use Resources) Actions {
	s.use, s.measured = clampPositive(use), true
	var act Actions
	o := s.policy.Overcommit
	if !o.On() {
		return act
	}
	limit := s.useLimit()
	var excess Resources
	if o.MemoryMB > 0 {
		excess.MemoryMB = max(0, s.use.MemoryMB-limit.MemoryMB)
	}
	if o.Vcores > 0 {
		excess.Vcores = max(0, s.use.Vcores-limit.Vcores)
	}
	if !excess.IsZero() {
		pausing := s.policy.Pause && excess.MemoryMB == 0
		for _, e := range s.victims(excess, Resources{}, pausing) {
			if pausing {
				s.pause(e)
				act.Pause = append(act.Pause, e.c.ID)
				continue
			}
			e.state = localKilling
			s.use = clampPositive(s.use.Sub(e.held))
			act.Kill = append(act.Kill, Stop{e.c.ID, ReasonEvicted})
		}
		return act
	}
	act.merge(s.drain())
	return act
}

func (s *LocalScheduler) start(e *localEntry) {
	e.state, e.since = localRunning, s.now
	s.hold(e, e.c.Resources)
	s.running = append(s.running, e)
}

// Submit takes an arriving container. One larger than the node is
// rejected. A container that fits starts at once. A guaranteed one that
// does not fit pauses or evicts running opportunistic containers (evictFor)
// and starts when there is room. An opportunistic one that does not fit
// (or would jump queued, paused or waiting guaranteed containers) waits in
// the queue, or is rejected if the queue is full.
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
		act.merge(s.evictFor())
		return act
	}
	if len(s.pendingG)+len(s.queue)+len(s.paused) == 0 && s.fitsOpportunistic(c.Resources) {
		s.start(e)
		act.Start = append(act.Start, c.ID)
		return act
	}
	if len(s.queue) >= s.queueLimit {
		delete(s.byID, c.ID)
		act.Drop = append(act.Drop, Stop{c.ID, ReasonRejected})
		return act
	}
	e.state, e.since = localQueued, s.now
	s.queue = append(s.queue, e)
	return act
}

// evictFor makes room for the waiting guaranteed containers: once the
// containers being killed have exited, every one of them must fit. When
// the policy pauses and their memory fits beside what runs, victims are
// paused (they keep their memory, give up the rest) and the guaranteed
// containers start at once; otherwise victims are killed, paused ones
// first (they do no work), then running ones as the policy picks them.
func (s *LocalScheduler) evictFor() Actions {
	var act Actions
	var need Resources
	for _, g := range s.pendingG {
		need = need.Add(g.c.Resources)
	}
	avail := s.free()
	for _, e := range s.running {
		if e.state == localKilling {
			avail = avail.Add(e.held)
		}
	}
	if need.Fits(avail) {
		return act
	}
	if s.policy.Pause {
		// What pausing frees: all but memory.
		pausable := avail
		for _, e := range s.running {
			if s.evictable(e) {
				pausable = pausable.Add(e.held).Sub(Resources{MemoryMB: e.held.MemoryMB})
			}
		}
		if need.Fits(pausable) {
			for _, e := range s.victims(need, avail, true) {
				s.pause(e)
				act.Pause = append(act.Pause, e.c.ID)
			}
			act.merge(s.drain())
			return act
		}
	}
	for _, e := range s.paused {
		if need.Fits(avail) {
			break
		}
		avail = avail.Add(e.held)
		e.state = localKilling
		act.Kill = append(act.Kill, Stop{e.c.ID, ReasonEvicted})
	}
	s.paused = slices.DeleteFunc(s.paused, func(e *localEntry) bool { return e.state == localKilling })
	for _, e := range s.victims(need, avail, false) {
		e.state = localKilling
		act.Kill = append(act.Kill, Stop{e.c.ID, ReasonEvicted})
	}
	return act
}

// evictable says whether a guaranteed arrival may take e's place.
func (s *LocalScheduler) evictable(e *localEntry) bool {
	return e.state == localRunning && e.c.ExecutionType == Opportunistic && !e.promoted
}

// victims picks running opportunistic containers whose room, added to
// avail, fits need (all but their memory when pausing, since a paused
// container keeps it). EvictNewestFirst takes the most recently started
// first. EvictLeastWaste takes the one container that frees enough with
// the least work lost if there is one, else the least wasteful first until
// enough is free, and then gives back any that were not needed. The work a
// container loses is its run time × its dominant share of the node, ×
// (1 + its app's progress): an app near its end loses more by waiting.
func (s *LocalScheduler) victims(need, avail Resources, pausing bool) []*localEntry {
	frees := func(e *localEntry) Resources {
		if pausing {
			return e.held.Sub(Resources{MemoryMB: e.held.MemoryMB})
		}
		return e.held
	}
	var cands []*localEntry
	for i := len(s.running) - 1; i >= 0; i-- { // newest first
		if e := s.running[i]; s.evictable(e) {
			cands = append(cands, e)
		}
	}
	var out []*localEntry
	if s.policy.Eviction == EvictNewestFirst {
		for _, e := range cands {
			if need.Fits(avail) {
				break
			}
			avail = avail.Add(frees(e))
			out = append(out, e)
		}
		return out
	}
	waste := func(e *localEntry) float64 {
		run := e.ran
		if e.state == localRunning && !e.since.IsZero() && s.now.After(e.since) {
			run += s.now.Sub(e.since)
		}
		return run.Seconds() * max(dominantShare(e.c.Resources, s.capacity), 1e-9) * (1 + e.c.Progress)
	}
	slices.SortStableFunc(cands, func(a, b *localEntry) int {
		wa, wb := waste(a), waste(b)
		switch {
		case wa < wb:
			return -1
		case wa > wb:
			return 1
		}
		return 0
	})
	for _, e := range cands { // one alone, the least wasteful that frees enough
		if need.Fits(avail.Add(frees(e))) {
			return []*localEntry{e}
		}
	}
	for _, e := range cands {
		if need.Fits(avail) {
			break
		}
		avail = avail.Add(frees(e))
		out = append(out, e)
	}
	for i := len(out) - 1; i >= 0; i-- { // the most wasteful first: spare what is not needed
		if rest := avail.Sub(frees(out[i])); need.Fits(rest) {
			avail = rest
			out = slices.Delete(out, i, i+1)
		}
	}
	return out
}

// dominantShare is r's largest share of capacity.
func dominantShare(r, capacity Resources) float64 {
	share := 0.0
	if capacity.MemoryMB > 0 {
		share = max(share, float64(r.MemoryMB)/float64(capacity.MemoryMB))
	}
	if capacity.Vcores > 0 {
		share = max(share, float64(r.Vcores)/float64(capacity.Vcores))
	}
	return share
}

// pause stops a running container: it keeps its memory, gives up the rest.
func (s *LocalScheduler) pause(e *localEntry) {
	s.running = removeEntry(s.running, e)
	if !e.since.IsZero() && s.now.After(e.since) {
		e.ran += s.now.Sub(e.since)
	}
	e.state, e.since = localPaused, s.now
	s.hold(e, Resources{MemoryMB: e.c.Resources.MemoryMB})
	s.paused = append(s.paused, e)
}

// ExpirePauses kills the containers paused longer than the policy's
// MaxPause (reason evicted), as of the time last set.
func (s *LocalScheduler) ExpirePauses() Actions {
	var act Actions
	for _, e := range s.paused {
		if s.now.Sub(e.since) > s.policy.MaxPause {
			e.state = localKilling
			act.Kill = append(act.Kill, Stop{e.c.ID, ReasonEvicted})
		}
	}
	s.paused = slices.DeleteFunc(s.paused, func(e *localEntry) bool { return e.state == localKilling })
	return act
}

// Finished records that a started container's process has exited (by
// itself or killed) and starts what now fits: waiting guaranteed
// containers first, then paused ones, then the queue in the policy's order.
func (s *LocalScheduler) Finished(id string) Actions {
	e, ok := s.byID[id]
	if !ok || (e.state != localRunning && e.state != localKilling && e.state != localPaused) {
		return Actions{}
	}
	delete(s.byID, id)
	if e.state == localRunning && !e.since.IsZero() && s.now.After(e.since) {
		s.learn(e.c.AppID, e.ran+s.now.Sub(e.since))
	}
	s.hold(e, Resources{})
	s.running = removeEntry(s.running, e)
	s.paused = removeEntry(s.paused, e)
	return s.drain()
}

// maxAppRuns bounds the apps whose run times a node remembers.
const maxAppRuns = 1024

// learn folds one container's run time into its app's moving average and
// every app's (weight 1/4 for the newest).
func (s *LocalScheduler) learn(app string, run time.Duration) {
	avg := func(old time.Duration) time.Duration {
		if old == 0 {
			return run
		}
		return (3*old + run) / 4
	}
	s.allRuns = avg(s.allRuns)
	if app == "" {
		return
	}
	if _, ok := s.runs[app]; !ok && len(s.runs) >= maxAppRuns {
		clear(s.runs)
	}
	s.runs[app] = avg(s.runs[app])
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
	for len(s.paused) > 0 && s.fitsOpportunistic(s.paused[0].c.Resources.Sub(s.paused[0].held)) { // it holds its memory already
		e := s.paused[0]
		s.paused = s.paused[1:]
		s.start(e)
		act.Resume = append(act.Resume, e.c.ID)
	}
	if len(s.paused) > 0 {
		return act // paused work resumes before queued work starts
	}
	for len(s.queue) > 0 {
		i := s.next()
		e := s.queue[i]
		if !s.fitsOpportunistic(e.c.Resources) {
			break
		}
		s.queue = slices.Delete(s.queue, i, i+1)
		s.start(e)
		act.Start = append(act.Start, e.c.ID)
	}
	return act
}

// next is the position in the queue of the container to start next: one
// that waited longer than MaxQueueWait (the longest waiting), else the
// policy's first.
func (s *LocalScheduler) next() int {
	if w := s.policy.MaxQueueWait; w > 0 && s.now.Sub(s.queue[0].since) > w {
		return 0 // arrival order: the first waited longest
	}
	best := 0
	switch s.policy.QueuePolicy {
	case QueueShortestFirst:
		for i := 1; i < len(s.queue); i++ {
			if s.expected(s.queue[i]) < s.expected(s.queue[best]) {
				best = i
			}
		}
	case QueueNearestCompletion:
		for i := 1; i < len(s.queue); i++ {
			if s.queue[i].c.Progress > s.queue[best].c.Progress {
				best = i
			}
		}
	}
	return best
}

// expected is how long a queued container is expected to run: as its ask
// said, else its app's average here, else every app's.
func (s *LocalScheduler) expected(e *localEntry) time.Duration {
	if e.c.Expected > 0 {
		return e.c.Expected
	}
	if d, ok := s.runs[e.c.AppID]; ok {
		return d
	}
	return s.allRuns
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
	case localPaused:
		s.paused = removeEntry(s.paused, e)
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
	// Paused counts opportunistic containers paused to make room: neither
	// running nor queued. Used includes their memory.
	Paused            int
	Used              Resources
	UsedOpportunistic Resources
}

// Load reports what runs and waits on the node.
func (s *LocalScheduler) Load() LocalLoad {
	l := LocalLoad{Queued: len(s.queue), Paused: len(s.paused), Used: s.used}
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
