package chaos

import (
	"fmt"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Bounds of the waits after a round's faults are healed. They are
// deadlines of polls, generous on purpose: reaching one is a finding.
const (
	recoverTimeout = 90 * time.Second // a leader, every node READY
	settleTimeout  = 60 * time.Second // faulted agents READY a node TTL after the heal
	finishTimeout  = 60 * time.Second // every app ended (they sleep at most 4 s)
	convergeWithin = 30 * time.Second // every server holds every acknowledged write
	porcupineLimit = 2 * time.Minute
)

// stats are the run's figures for the summary.
type stats struct {
	submitOK, submitFail     int64
	unackedTookEffect        int
	writeOK, writeUnknown    int64
	readOK, readFail         int64
	appsFinished, appsFailed int
	ackedChecked             int
	lostWrites               int
	duplicates               int
	linearChecks             int
	faults                   map[faultKind]int
}

// loop runs the rounds.
func (rn *run) loop() {
	rn.stats.faults = map[faultKind]int{}
	for i := 1; i <= rn.cfg.rounds; i++ {
		if d, ok := rn.t.Deadline(); ok && time.Until(d) < 6*time.Minute {
			rn.abort(fmt.Sprintf("stopped before round %d: the test's -timeout leaves under 6 minutes", i))
			return
		}
		before := rn.violationCount()
		rn.mu.Lock()
		rn.round = i
		rn.mu.Unlock()
		plan := rn.plan(i)
		rn.runRound(i, plan)
		rn.mu.Lock()
		rn.roundsRun = i
		aborted := rn.aborted != ""
		rn.mu.Unlock()
		if aborted || rn.cfg.failFast && rn.violationCount() > before {
			return
		}
	}
}

// plan returns round i's plan: the seeded schedule's round i (or
// -chaos.only's), after the acceptance round if one was asked for.
func (rn *run) plan(i int) roundPlan {
	idx := i
	if rn.cfg.acceptance {
		if i == 1 {
			return acceptancePlan()
		}
		idx = i - 1
	}
	if rn.cfg.only > 0 {
		idx = rn.cfg.only
	}
	plan := planRound(rn.cfg.seed, idx, rn.cfg.kinds)
	if rn.cfg.hold > 0 {
		for j := range plan.faults {
			plan.faults[j].hold = rn.cfg.hold
		}
	}
	return plan
}

func (rn *run) abort(why string) {
	rn.mu.Lock()
	rn.aborted = why
	rn.mu.Unlock()
	rn.fail("harness", "%s", why)
}

// runRound is one round: load, the faults held and healed, more load,
// then recovery and the checks.
func (rn *run) runRound(i int, plan roundPlan) {
	began := time.Now()
	before := rn.violationCount()
	var planned []string
	for _, f := range plan.faults {
		planned = append(planned, f.String())
	}
	which := fmt.Sprintf("schedule %d", plan.index)
	if plan.index == 0 {
		which = "the SPEC §13 acceptance"
	}
	rn.logf("round %d/%d (%s, seed %d): %s", i, rn.cfg.rounds, which, rn.cfg.seed, strings.Join(planned, " + "))

	ld := rn.startLoad(i, plan.index)
	time.Sleep(plan.warmup) // load before the faults: part of the experiment
	injected := rn.runFaults(plan)
	time.Sleep(plan.tail) // load after the heal: part of the experiment
	ld.finish()
	faultTime := time.Since(began)

	if err := rn.waitHealthy(recoverTimeout); err != nil {
		rn.fail("recovery", "the cluster did not recover within %s of the heal: %v", recoverTimeout, err)
		rn.abort("the cluster did not recover; later rounds would test nothing")
		rn.roundLine(i, plan, injected, ld, faultTime, time.Since(began), before, 0, 0)
		return
	}
	if err := rn.waitNodesSettled(settleTimeout); err != nil {
		rn.fail("recovery", "%v", err)
	}
	finished, failed := rn.drainApps(i, finishTimeout)
	rn.checkServersAgree(i)
	rn.checkRegister(i)
	for _, v := range rn.terms.scan(rn.c) {
		rn.fail("one-leader-per-term", "%s", v)
	}
	rn.roundLine(i, plan, injected, ld, faultTime, time.Since(began), before, finished, failed)
}

// roundLine prints the round's line and adds its figures to the run's.
func (rn *run) roundLine(i int, plan roundPlan, injected []*activeFault, ld *loadGen, faultTime, total time.Duration, before, finished, failed int) {
	c := ld.counts
	rn.mu.Lock()
	rn.stats.submitOK += c.submitOK.Load()
	rn.stats.submitFail += c.submitFail.Load()
	rn.stats.writeOK += c.writeOK.Load()
	rn.stats.writeUnknown += c.writeUnknown.Load()
	rn.stats.readOK += c.readOK.Load()
	rn.stats.readFail += c.readFail.Load()
	rn.stats.appsFinished += finished
	rn.stats.appsFailed += failed
	var vs []string
	for _, v := range rn.violations[before:] {
		vs = append(vs, v.check)
	}
	rn.mu.Unlock()
	var fs []string
	for _, f := range injected {
		rn.mu.Lock()
		rn.stats.faults[f.plan.kind]++
		rn.mu.Unlock()
		fs = append(fs, fmt.Sprintf("%s on %s %.1fs", f.plan.kind, f.node, float64(f.healAt-f.at)/1e9))
	}
	if len(fs) == 0 {
		fs = []string{"no fault injected"}
	}
	verdict := "no violation"
	if len(vs) > 0 {
		verdict = fmt.Sprintf("%d VIOLATION(S): %s", len(vs), strings.Join(dedupe(vs), ", "))
	}
	rn.logf("round %d/%d: %s | %.0fs (faults+load %.0fs) | submits %d ok %d failed, applies %d ok %d unknown, reads %d ok %d failed | apps %d finished %d not | %s",
		i, rn.cfg.rounds, strings.Join(fs, " + "), total.Seconds(), faultTime.Seconds(),
		c.submitOK.Load(), c.submitFail.Load(), c.writeOK.Load(), c.writeUnknown.Load(), c.readOK.Load(), c.readFail.Load(),
		finished, failed, verdict)
}

func dedupe(s []string) []string {
	seen := map[string]int{}
	var order []string
	for _, x := range s {
		if seen[x] == 0 {
			order = append(order, x)
		}
		seen[x]++
	}
	for i, x := range order {
		if seen[x] > 1 {
			order[i] = fmt.Sprintf("%s×%d", x, seen[x])
		}
	}
	return order
}

// serverState is what one server holds, read with -stale from it alone.
type serverState struct {
	apps  map[string]appInfo
	nodes map[string]nodeInfo
	list  []appInfo
}

func (rn *run) readServer(s string) (*serverState, error) {
	addr := []string{rn.c.rpcAddr(s)}
	st := &serverState{apps: map[string]appInfo{}, nodes: map[string]nodeInfo{}}
	if _, err := rn.cliJSON(readTimeout, addr, &st.list, "app", "list", "-stale"); err != nil {
		return nil, err
	}
	for _, a := range st.list {
		st.apps[a.ID] = a
	}
	var nodes []nodeInfo
	if _, err := rn.cliJSON(readTimeout, addr, &nodes, "node", "list", "-stale"); err != nil {
		return nil, err
	}
	for _, n := range nodes {
		st.nodes[n.ID] = n
	}
	return st, nil
}

// checkServersAgree: every acknowledged app is on every server, and once
// the cluster is quiet the three servers hold the same apps in the same
// states and the same nodes (a poll until they do, within convergeWithin).
// It also checks for duplicate apps.
func (rn *run) checkServersAgree(round int) {
	acked := map[string]*submission{}
	rn.apps.mu.Lock()
	for _, s := range rn.apps.subs {
		if s.appID != "" {
			acked[s.appID] = s
		}
	}
	rn.apps.mu.Unlock()
	deadline := time.Now().Add(convergeWithin)
	var states map[string]*serverState
	var problems []string
	for {
		states, problems = map[string]*serverState{}, nil
		for _, s := range serverNames {
			st, err := rn.readServer(s)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", s, err))
				continue
			}
			states[s] = st
			var missing []string
			for id, sub := range acked {
				if _, ok := st.apps[id]; !ok {
					missing = append(missing, fmt.Sprintf("%s (%s, acknowledged in round %d at +%.1fs via %s)", id, sub.name, sub.round, float64(sub.res.end)/1e9, sub.res.addrs))
				}
			}
			if len(missing) > 0 {
				problems = append(problems, fmt.Sprintf("lost: %s lacks %d acknowledged app(s): %s", s, len(missing), strings.Join(missing, "; ")))
			}
		}
		if len(problems) == 0 {
			problems = diffServers(states)
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	rn.mu.Lock()
	rn.stats.ackedChecked = len(acked)
	rn.mu.Unlock()
	for _, p := range problems {
		if strings.HasPrefix(p, "lost: ") {
			rn.mu.Lock()
			rn.stats.lostWrites++
			rn.mu.Unlock()
			rn.fail("acknowledged-writes", "%s", strings.TrimPrefix(p, "lost: "))
		} else {
			rn.fail("servers-agree", "%s", p)
		}
	}
	for _, st := range states {
		d := rn.checkDuplicates(st.list, round)
		rn.mu.Lock()
		rn.stats.duplicates += d
		rn.mu.Unlock()
		break // one server is enough: they agree or that was reported
	}
	rn.countUnackedThatTookEffect(round, states)
}

// diffServers lists where the servers' states differ.
func diffServers(states map[string]*serverState) []string {
	var out []string
	ref, refName := (*serverState)(nil), ""
	for _, s := range serverNames {
		if st, ok := states[s]; ok {
			ref, refName = st, s
			break
		}
	}
	if ref == nil {
		return []string{"no server answered"}
	}
	for _, s := range serverNames {
		st, ok := states[s]
		if !ok || s == refName {
			continue
		}
		var d []string
		for id, a := range ref.apps {
			b, ok := st.apps[id]
			switch {
			case !ok:
				d = append(d, fmt.Sprintf("app %s only on %s", id, refName))
			case a.State != b.State || a.Name != b.Name:
				d = append(d, fmt.Sprintf("app %s: %s/%s on %s, %s/%s on %s", id, a.Name, a.State, refName, b.Name, b.State, s))
			}
		}
		for id := range st.apps {
			if _, ok := ref.apps[id]; !ok {
				d = append(d, fmt.Sprintf("app %s only on %s", id, s))
			}
		}
		for id, n := range ref.nodes {
			m := st.nodes[id]
			if n.Status != m.Status || n.Epoch != m.Epoch || n.AllocatedGuaranteed != m.AllocatedGuaranteed {
				d = append(d, fmt.Sprintf("node %s: %s epoch %d %s on %s, %s epoch %d %s on %s", id,
					n.Status, n.Epoch, n.AllocatedGuaranteed, refName, m.Status, m.Epoch, m.AllocatedGuaranteed, s))
			}
		}
		if len(d) > 0 {
			if len(d) > 8 {
				d = append(d[:8], fmt.Sprintf("… %d more", len(d)-8))
			}
			out = append(out, fmt.Sprintf("%s and %s differ %s after the cluster healed: %s", refName, s, convergeWithin, strings.Join(d, "; ")))
		}
	}
	return out
}

// countUnackedThatTookEffect counts submissions that failed but whose app
// exists: legal (their outcome was unknown), and worth knowing.
func (rn *run) countUnackedThatTookEffect(round int, states map[string]*serverState) {
	names := map[string]bool{}
	for _, st := range states {
		for _, a := range st.list {
			names[a.Name] = true
		}
		break
	}
	rn.apps.mu.Lock()
	n := 0
	for _, s := range rn.apps.subs {
		if s.round == round && s.appID == "" && names[s.name] {
			n++
		}
	}
	rn.apps.mu.Unlock()
	rn.mu.Lock()
	rn.stats.unackedTookEffect += n
	rn.mu.Unlock()
}

// checkRegister reads the queue register once more (consistent, into the
// history), checks that every server converges to that value, and checks
// the history of this round and the one before for linearizability.
func (rn *run) checkRegister(round int) {
	final, err := rn.readQueue(harnessClient, round, rn.c.serverAddrs(), false)
	if err != nil {
		rn.fail("acknowledged-writes", "the final consistent read of root.chaos failed: %v", err)
		return
	}
	deadline := time.Now().Add(convergeWithin)
	for {
		var off []string
		for _, s := range serverNames {
			op, err := rn.readQueue(harnessClient, round, []string{rn.c.rpcAddr(s)}, true)
			if err != nil {
				off = append(off, fmt.Sprintf("%s: %v", s, err))
			} else if op.value != final.value {
				off = append(off, fmt.Sprintf("%s holds weight %d", s, op.value))
			}
		}
		if len(off) == 0 {
			break
		}
		if time.Now().After(deadline) {
			rn.mu.Lock()
			rn.stats.lostWrites++
			rn.mu.Unlock()
			rn.fail("acknowledged-writes", "root.chaos's weight is %d on the leader but %s, %s after the heal", final.value, strings.Join(off, ", "), convergeWithin)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	ops := rn.hist.selectRounds(map[int]bool{round - 1: true, round: true})
	res, evidence := rn.checkLinearizable(ops, fmt.Sprintf("history-round-%03d", round), porcupineLimit)
	rn.mu.Lock()
	rn.stats.linearChecks++
	rn.mu.Unlock()
	switch res {
	case porcupine.Illegal:
		rn.fail("linearizable", "the queue history of rounds %d–%d (%d ops) is not linearizable: %s", round-1, round, len(ops), evidence)
	case porcupine.Unknown:
		rn.logf("  linearizability of rounds %d–%d inconclusive: %s", round-1, round, evidence)
	}
}
