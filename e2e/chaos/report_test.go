package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// finalChecks runs the checks over the whole run: the whole queue history,
// the leaders of every term.
func (rn *run) finalChecks() {
	if rn.hist == nil {
		return
	}
	rn.mu.Lock()
	rn.round = 0 // violations found now belong to the run as a whole
	rn.mu.Unlock()
	ops := rn.hist.selectRounds(nil)
	res, evidence := rn.checkLinearizable(ops, "history-all", 5*time.Minute)
	switch res {
	case porcupine.Illegal:
		rn.fail("linearizable", "the whole queue history (%d ops) is not linearizable: %s", len(ops), evidence)
	case porcupine.Unknown:
		rn.logf("linearizability of the whole history inconclusive: %s", evidence)
	}
	for _, v := range rn.terms.scan(rn.c) {
		rn.fail("one-leader-per-term", "%s", v)
	}
	rn.writeHistory(ops)
}

// writeHistory keeps the queue history and the submissions as text in the
// run directory.
func (rn *run) writeHistory(ops []queueOp) {
	var b strings.Builder
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].call < ops[j].call })
	for _, o := range ops {
		fmt.Fprintf(&b, "round %d %s\n", o.round, o)
	}
	os.WriteFile(filepath.Join(rn.dir, "queue-history.txt"), []byte(b.String()), 0o644)
	b.Reset()
	rn.apps.mu.Lock()
	for _, s := range rn.apps.subs {
		state := rn.apps.state[s.appID].State
		fmt.Fprintf(&b, "round %d %s app=%q state=%s [%.3fs, %.3fs] via %s: %s\n", s.round, s.name, s.appID, state,
			float64(s.res.start)/1e9, float64(s.res.end)/1e9, s.res.addrs, s.res.errLine())
	}
	rn.apps.mu.Unlock()
	os.WriteFile(filepath.Join(rn.dir, "submissions.txt"), []byte(b.String()), 0o644)
}

// summary prints the run's figures and every violation.
func (rn *run) summary() {
	if rn.hist == nil || rn.nodes == nil {
		return
	}
	terms, maxWinners := rn.terms.figures()
	rn.nodes.mu.Lock()
	recSamples, recOver, downs := rn.nodes.samples, rn.nodes.overSamples, rn.nodes.downReported
	rn.nodes.mu.Unlock()
	rn.procs.mu.Lock()
	realSamples, realOver, unconfirmed := rn.procs.samples, rn.procs.overSamples, rn.procs.unconfirmed
	rn.procs.mu.Unlock()
	rn.mu.Lock()
	defer rn.mu.Unlock()
	st := rn.stats
	var kinds []string
	for _, k := range allKinds {
		if st.faults[k] > 0 {
			kinds = append(kinds, fmt.Sprintf("%s×%d", k, st.faults[k]))
		}
	}
	byCheck := map[string]int{}
	for _, v := range rn.violations {
		byCheck[v.check]++
	}
	lines := []string{
		"==== chaos summary ====",
		fmt.Sprintf("seed %d; rounds %d of %d; %.0fs; faults: %s", rn.cfg.seed, rn.roundsRun, rn.cfg.rounds, time.Since(rn.start).Seconds(), strings.Join(kinds, ", ")),
		fmt.Sprintf("acknowledged writes checked on every server: %d app submissions, %d queue applies (+%d of unknown outcome)", st.ackedChecked, st.writeOK+1, st.writeUnknown),
		fmt.Sprintf("apps: %d submitted and acknowledged, %d submissions failed (%d of them took effect anyway), %d finished, %d failed or did not finish",
			st.submitOK, st.submitFail, st.unackedTookEffect, st.appsFinished, st.appsFailed),
		fmt.Sprintf("lost writes: %d; duplicate apps: %d", st.lostWrites, st.duplicates),
		fmt.Sprintf("queue history: %d applies ok, %d unknown, %d reads ok, %d failed; %d linearizability checks, violations %d",
			st.writeOK, st.writeUnknown, st.readOK, st.readFail, st.linearChecks+1, byCheck["linearizable"]),
		fmt.Sprintf("overcommit samples: recorded %d (%d over capacity), real %d (%d over capacity, %d unconfirmed)", recSamples, recOver, realSamples, realOver, unconfirmed),
		fmt.Sprintf("leaders per term: %d terms won, at most %d winner(s) in one term", terms, maxWinners),
		fmt.Sprintf("healthy nodes marked down (or re-registered): %d", downs),
		fmt.Sprintf("processes that exited by themselves: %d", len(rn.exits)),
	}
	if rn.aborted != "" {
		lines = append(lines, "aborted: "+rn.aborted)
	}
	if len(rn.violations) == 0 {
		lines = append(lines, "violations: none")
	} else {
		var checks []string
		for c, n := range byCheck {
			checks = append(checks, fmt.Sprintf("%s %d", c, n))
		}
		sort.Strings(checks)
		lines = append(lines, fmt.Sprintf("violations: %d (%s)", len(rn.violations), strings.Join(checks, ", ")))
		for _, v := range rn.violations {
			msg := v.msg
			if len(msg) > 600 {
				msg = msg[:600] + " …(full text in chaos.log)"
			}
			lines = append(lines, fmt.Sprintf("  round %d +%.1fs [%s] %s", v.round, float64(v.at)/1e9, v.check, msg))
		}
		lines = append(lines, fmt.Sprintf("replay: %s   (round N of the schedule alone: add -chaos.only=N to CHAOS_FLAGS, ROUNDS=1)", rn.cfg.replay()))
	}
	out := strings.Join(lines, "\n") + "\n"
	if rn.log != nil {
		rn.log.Write([]byte(out))
	} else {
		os.Stdout.WriteString(out)
	}
}
