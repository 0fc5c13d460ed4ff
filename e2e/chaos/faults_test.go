package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"
)

// faultKind names one fault of the catalogue.
type faultKind string

const (
	// leaderPartition drops everything between the leader and both
	// followers (the SPEC §13 acceptance: "the leader black-holed from both
	// followers"); agents and clients still reach every server.
	leaderPartition faultKind = "leader-partition"
	// leaderPartitionIn drops what the leader receives from the followers.
	leaderPartitionIn faultKind = "leader-partition-in"
	// leaderPartitionOut drops what the leader sends to the followers.
	leaderPartitionOut faultKind = "leader-partition-out"
	// leaderKill SIGKILLs the leader and restarts it on its data dir at heal.
	leaderKill faultKind = "leader-kill"
	// leaderStop SIGSTOPs the leader (a hung server) and SIGCONTs it at heal.
	leaderStop faultKind = "leader-stop"
	// agentPartition cuts one agent off from everything.
	agentPartition faultKind = "agent-partition"
	// agentKill SIGKILLs one agent and restarts it at heal.
	agentKill faultKind = "agent-kill"
	// agentStop SIGSTOPs one agent process (its containers keep running).
	agentStop faultKind = "agent-stop"
	// diskFull fills one server's data dir (a tmpfs of its own) and
	// deletes the filler at heal.
	diskFull faultKind = "disk-full"
)

var allKinds = []faultKind{leaderPartition, leaderPartitionIn, leaderPartitionOut, leaderKill, leaderStop,
	agentPartition, agentKill, agentStop, diskFull}

// onAgent reports whether the fault hits an agent (else a server).
func (k faultKind) onAgent() bool {
	return k == agentPartition || k == agentKill || k == agentStop
}

func parseKinds(s string) ([]faultKind, error) {
	if strings.TrimSpace(s) == "" {
		return allKinds, nil
	}
	var out []faultKind
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		ok := false
		for _, k := range allKinds {
			if string(k) == f {
				out, ok = append(out, k), true
			}
		}
		if !ok {
			var names []string
			for _, k := range allKinds {
				names = append(names, string(k))
			}
			return nil, fmt.Errorf("unknown fault %q; the kinds are %s", f, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// faultPlan is one fault of a round's schedule.
type faultPlan struct {
	kind   faultKind
	target string        // agent name, server name, or "leader"
	offset time.Duration // after the round's warm-up
	hold   time.Duration
}

func (f faultPlan) String() string {
	return fmt.Sprintf("%s(%s, +%.1fs, hold %.1fs)", f.kind, f.target, f.offset.Seconds(), f.hold.Seconds())
}

// roundPlan is everything the seed decides about a round.
type roundPlan struct {
	index  int // the round of the schedule (differs from the run's round only with -chaos.only)
	faults []faultPlan
	warmup time.Duration // load before the first fault
	tail   time.Duration // load after the last heal
}

// rngFor is the random stream of one part of one round: the schedule of
// round i depends only on the seed and i, never on earlier rounds.
func rngFor(seed uint64, round, stream int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(round)<<16|uint64(stream)))
}

// halfSeconds draws a duration in [lo, hi] seconds in steps of 0.5 s.
func halfSeconds(rng *rand.Rand, lo, hi int) time.Duration {
	return time.Duration(lo)*time.Second + time.Duration(rng.IntN(2*(hi-lo)+1))*500*time.Millisecond
}

// planRound draws round i's faults. The first len(kinds) rounds take the
// kinds in a seeded order, so any run that long meets every kind once;
// later rounds draw at random. A third of rounds add a second fault of the
// other class (a server fault with an agent fault), starting up to 4 s
// later.
func planRound(seed uint64, i int, kinds []faultKind) roundPlan {
	order := append([]faultKind(nil), kinds...)
	rngFor(seed, 0, 0).Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
	rng := rngFor(seed, i, 0)
	p := roundPlan{index: i, warmup: 3 * time.Second, tail: 4 * time.Second}
	first := order[rng.IntN(len(order))]
	if i >= 1 && i <= len(order) {
		first = order[i-1]
	}
	p.faults = append(p.faults, faultPlan{kind: first, target: pickTarget(rng, first), hold: halfSeconds(rng, 4, 15)})
	if rng.IntN(3) == 0 {
		var other []faultKind
		for _, k := range kinds {
			if k.onAgent() != first.onAgent() {
				other = append(other, k)
			}
		}
		if len(other) > 0 {
			k := other[rng.IntN(len(other))]
			p.faults = append(p.faults, faultPlan{kind: k, target: pickTarget(rng, k), offset: halfSeconds(rng, 0, 4), hold: halfSeconds(rng, 3, 12)})
		}
	}
	return p
}

// acceptancePlan is SPEC §13's acceptance as a round: the leader
// black-holed from both followers for 15 s under load (index 0: outside the
// seeded schedule).
func acceptancePlan() roundPlan {
	return roundPlan{index: 0, warmup: 3 * time.Second, tail: 4 * time.Second,
		faults: []faultPlan{{kind: leaderPartition, target: "leader", hold: 15 * time.Second}}}
}

func pickTarget(rng *rand.Rand, k faultKind) string {
	switch {
	case k.onAgent():
		return agentNames[rng.IntN(len(agentNames))]
	case k == diskFull:
		if rng.IntN(2) == 0 {
			return "leader"
		}
		return serverNames[rng.IntN(len(serverNames))]
	}
	return "leader"
}

// activeFault is an injected fault and how to heal it.
type activeFault struct {
	plan   faultPlan
	node   string // the process it hit
	desc   string
	heal   func() error
	at     int64
	healAt int64
}

// inject applies a fault now. A fault on "the leader" hits whichever server
// all running servers agree leads; with no such leader it is skipped.
func (rn *run) inject(f faultPlan) (*activeFault, error) {
	target := f.target
	if target == "leader" {
		l, err := rn.leader(10 * time.Second)
		if err != nil {
			return nil, fmt.Errorf("no leader to fault: %v", err)
		}
		target = l
	}
	p := rn.c.proc(target)
	h := p.host
	af := &activeFault{plan: f, node: target, at: rn.now()}
	var followers []string
	for _, s := range serverNames {
		if s != target {
			followers = append(followers, rn.nw.hosts[s].ip)
		}
	}
	var err error
	switch f.kind {
	case leaderPartition, leaderPartitionIn, leaderPartitionOut:
		in, out := f.kind != leaderPartitionOut, f.kind != leaderPartitionIn
		err = dropPeers(h, followers, in, out)
		af.desc = fmt.Sprintf("%s: dropping %s in %s", f.kind, map[faultKind]string{
			leaderPartition: "both directions", leaderPartitionIn: "what it receives", leaderPartitionOut: "what it sends"}[f.kind], h.ns)
		af.heal = func() error { return heal(h) }
	case agentPartition:
		rn.nodes.exempt(target)
		err = isolate(h)
		af.desc = fmt.Sprintf("%s: %s cut off from everything", f.kind, target)
		af.heal = func() error { return heal(h) }
	case leaderKill, agentKill:
		if f.kind == agentKill {
			rn.nodes.exempt(target)
		}
		pid := p.pid()
		p.kill()
		af.desc = fmt.Sprintf("%s: SIGKILL %s (pid %d)", f.kind, target, pid)
		af.heal = p.start
	case leaderStop, agentStop:
		if f.kind == agentStop {
			rn.nodes.exempt(target)
		}
		err = p.signal(syscall.SIGSTOP)
		af.desc = fmt.Sprintf("%s: SIGSTOP %s (pid %d)", f.kind, target, p.pid())
		af.heal = func() error { return p.signal(syscall.SIGCONT) }
	case diskFull:
		var path string
		path, err = fillDisk(p)
		af.desc = fmt.Sprintf("%s: %s's data dir (%d MiB tmpfs) filled by %s", f.kind, target, serverDiskMB, path)
		af.heal = func() error { return os.Remove(path) }
	}
	if err != nil {
		if af.heal != nil {
			af.heal()
		}
		if f.kind.onAgent() {
			rn.nodes.healed(target, rn.now())
		}
		return nil, fmt.Errorf("%s on %s: %v", f.kind, target, err)
	}
	return af, nil
}

// healFault undoes a fault; an agent stays exempt from the healthy-node
// checks until it is READY again and a node TTL has passed (nodeGrace).
func (rn *run) healFault(af *activeFault) error {
	err := af.heal()
	af.healAt = rn.now()
	if af.plan.kind.onAgent() {
		rn.nodes.healed(af.node, af.healAt)
	}
	return err
}

// runFaults carries out a round's fault schedule: each fault starts at its
// offset and is held for its hold (holding a fault is the experiment, not
// synchronisation). It returns the faults that were injected.
func (rn *run) runFaults(plan roundPlan) []*activeFault {
	type event struct {
		at   time.Duration
		f    int
		heal bool
	}
	var evs []event
	for i, f := range plan.faults {
		evs = append(evs, event{at: f.offset, f: i}, event{at: f.offset + f.hold, f: i, heal: true})
	}
	sort.SliceStable(evs, func(a, b int) bool { return evs[a].at < evs[b].at })
	active := make([]*activeFault, len(plan.faults))
	var done []*activeFault
	begin := time.Now()
	for _, ev := range evs {
		time.Sleep(time.Until(begin.Add(ev.at)))
		if !ev.heal {
			af, err := rn.inject(plan.faults[ev.f])
			if err != nil {
				rn.logf("  fault skipped: %v", err)
				continue
			}
			active[ev.f] = af
			rn.logf("  inject %s", af.desc)
			continue
		}
		af := active[ev.f]
		if af == nil {
			continue
		}
		if err := rn.healFault(af); err != nil {
			rn.fail("harness", "heal %s: %v", af.desc, err)
		}
		rn.logf("  healed %s after %.1fs", af.node, float64(af.healAt-af.at)/1e9)
		done = append(done, af)
	}
	return done
}
