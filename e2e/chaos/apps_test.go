package chaos

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"
)

// appSpec is what the harness asked for when it submitted an app.
type appSpec struct {
	queue      string
	containers int
	execType   string
	memoryMB   int64
	sleep      string
}

// The AM container's size: the CLI's defaults.
const (
	amMemoryMB = 256
	amVcores   = 1
)

func (s appSpec) taskResources() resources { return resources{MemoryMB: s.memoryMB, Vcores: 1} }
func (s appSpec) amResources() resources   { return resources{MemoryMB: amMemoryMB, Vcores: amVcores} }

func (s appSpec) args(name string) []string {
	return []string{"app", "submit", "-json", "-name", name, "-queue", s.queue,
		"-num-containers", fmt.Sprint(s.containers), "-container-type", s.execType,
		"-memory-mb", fmt.Sprint(s.memoryMB), "-vcores", "1", "-max-am-attempts", "4",
		"--", "sh", "-c", "sleep " + s.sleep}
}

// randomSpec draws an app: 1–3 short containers, mostly guaranteed.
func randomSpec(rng *rand.Rand) appSpec {
	s := appSpec{queue: "root.default", containers: 1 + rng.IntN(3), execType: "GUARANTEED",
		memoryMB: []int64{128, 256}[rng.IntN(2)], sleep: []string{"0.2", "0.5", "1", "2", "4"}[rng.IntN(5)]}
	if rng.IntN(10) < 3 {
		s.execType = "OPPORTUNISTIC"
	}
	if rng.IntN(2) == 0 {
		s.queue = "root.chaos"
	}
	return s
}

// submission is one `weft app submit`: acknowledged when it printed an app ID.
type submission struct {
	name  string
	round int
	spec  appSpec
	res   cliResult
	appID string // "" unless acknowledged
}

// appBook is every submission and what the servers last said of each app.
type appBook struct {
	mu       sync.Mutex
	subs     []*submission
	byName   map[string]*submission
	pending  int               // submissions under way
	idName   map[string]string // app ID → name, from acks and from app lists
	state    map[string]appInfo
	verdict  map[string]string // app ID → why it was already reported (each app once)
	finished map[string]bool
}

func newAppBook() *appBook {
	return &appBook{byName: map[string]*submission{}, idName: map[string]string{}, state: map[string]appInfo{},
		verdict: map[string]string{}, finished: map[string]bool{}}
}

func (b *appBook) begin() {
	b.mu.Lock()
	b.pending++
	b.mu.Unlock()
}

func (b *appBook) record(s *submission) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending--
	b.subs = append(b.subs, s)
	b.byName[s.name] = s
	if s.appID != "" {
		b.idName[s.appID] = s.name
	}
}

// specOf returns the spec of a submitted app by its ID.
func (b *appBook) specOf(appID string) (appSpec, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.byName[b.idName[appID]]
	if !ok {
		return appSpec{}, false
	}
	return s.spec, true
}

// inFlightFor is how long after its acknowledgement an app counts as in
// flight when the harness has not seen it end: longer than a chaos app
// runs when nothing goes wrong. Past it the app no longer holds back new
// submissions, so the load goes on while faults keep the harness from
// reading the apps' states (a gate on observed states alone would stop the
// load exactly during the faults).
const inFlightFor = 8 * time.Second

// inFlight counts submissions under way and apps acknowledged within
// inFlightFor that were not seen ending.
func (b *appBook) inFlight(now int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.pending
	for _, s := range b.subs {
		if now-s.res.end > int64(inFlightFor) {
			continue
		}
		if s.appID != "" && !terminal(b.state[s.appID].State) && b.verdict[s.appID] == "" {
			n++
		}
	}
	return n
}

// update takes an app list.
func (b *appBook) update(apps []appInfo) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range apps {
		b.state[a.ID] = a
		if _, ok := b.idName[a.ID]; !ok {
			b.idName[a.ID] = a.Name
		}
	}
}

// appLoop keeps the app book's states fresh (consistent reads).
func (rn *run) appLoop() {
	defer rn.monitors.Done()
	rng := rand.New(rand.NewPCG(rn.cfg.seed, 0xa99))
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-rn.stopMon:
			return
		case <-tick.C:
		}
		var apps []appInfo
		if _, err := rn.cliJSON(pollTimeout, rn.shuffled(rng), &apps, "app", "list"); err == nil {
			rn.apps.update(apps)
		}
	}
}

// submitter keeps a few apps in flight until stop is closed.
func (ld *loadGen) submitter(w int, rng *rand.Rand) {
	defer ld.wg.Done()
	rn := ld.rn
	for n := 1; !ld.stopped(); n++ {
		for rn.apps.inFlight(rn.now()) >= maxInFlight && !ld.stopped() {
			time.Sleep(200 * time.Millisecond) // pacing the load, not synchronisation
		}
		if ld.stopped() {
			return
		}
		s := &submission{name: fmt.Sprintf("r%03d-s%d-%03d", ld.round, w, n), round: ld.round, spec: randomSpec(rng)}
		rn.apps.begin()
		s.res = rn.cli(writeTimeout, rn.shuffled(rng), s.spec.args(s.name)...)
		if s.res.ok() {
			var resp struct {
				AppID string `json:"app_id"`
			}
			if err := jsonUnmarshal(s.res.stdout, &resp); err == nil && resp.AppID != "" {
				s.appID = resp.AppID
			}
		}
		rn.apps.record(s)
		if s.appID != "" {
			ld.counts.submitOK.Add(1)
		} else {
			ld.counts.submitFail.Add(1)
		}
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
	}
}

// drainApps waits until every app the servers hold (acknowledged or not)
// has ended, and reports those that did not end FINISHED. Apps already
// reported are not waited for again.
func (rn *run) drainApps(round int, timeout time.Duration) (finished, failed int) {
	deadline := time.Now().Add(timeout)
	var apps []appInfo
	for {
		var got []appInfo
		if _, err := rn.cliJSON(readTimeout, rn.c.serverAddrs(), &got, "app", "list"); err == nil {
			apps = got
			rn.apps.update(got)
			if rn.allEnded(got) && rn.ackedSeen(got) {
				break
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	b := rn.apps
	for _, a := range apps {
		b.mu.Lock()
		seen := b.verdict[a.ID] != "" || b.finished[a.ID]
		b.mu.Unlock()
		if seen {
			continue
		}
		switch {
		case a.State == "FINISHED":
			b.mu.Lock()
			b.finished[a.ID] = true
			b.mu.Unlock()
			finished++
			continue
		case terminal(a.State):
			failed++
			rn.fail("apps-finish", "app %s (%s) ended %s: %q; %s", a.ID, a.Name, a.State, a.Diagnostics, rn.appEvidence(a))
		default:
			failed++
			rn.fail("apps-finish", "app %s (%s) is still %s %s after the faults healed; %s", a.ID, a.Name, a.State, timeout, rn.appEvidence(a))
			// Kill it, so that its containers do not hold the nodes for
			// the rounds to come.
			if res := rn.cli(writeTimeout, rn.c.serverAddrs(), "app", "kill", a.ID); !res.ok() {
				rn.logf("  could not kill %s after reporting it: %s", a.ID, res.errLine())
			}
		}
		b.mu.Lock()
		b.verdict[a.ID] = a.State
		b.mu.Unlock()
	}
	return finished, failed
}

// allEnded reports whether every app not yet reported has ended.
func (rn *run) allEnded(apps []appInfo) bool {
	rn.apps.mu.Lock()
	defer rn.apps.mu.Unlock()
	for _, a := range apps {
		if !terminal(a.State) && rn.apps.verdict[a.ID] == "" {
			return false
		}
	}
	return true
}

// ackedSeen reports whether the list holds every acknowledged app.
func (rn *run) ackedSeen(apps []appInfo) bool {
	ids := map[string]bool{}
	for _, a := range apps {
		ids[a.ID] = true
	}
	rn.apps.mu.Lock()
	defer rn.apps.mu.Unlock()
	for _, s := range rn.apps.subs {
		if s.appID != "" && !ids[s.appID] {
			return false
		}
	}
	return true
}

// appEvidence describes an app's attempts and containers for a report.
func (rn *run) appEvidence(a appInfo) string {
	var parts []string
	for _, at := range a.Attempts {
		parts = append(parts, fmt.Sprintf("AM attempt %d %s on %s: %q", at.Attempt, at.ContainerID, at.NodeID, at.Diagnostics))
	}
	var amLogs []string
	if n := len(a.Attempts); n > 0 {
		at := a.Attempts[n-1]
		res := rn.cli(readTimeout, rn.c.serverAddrs(), "container", "logs", "-stderr", at.ContainerID)
		if res.ok() {
			lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
			if len(lines) > 8 {
				lines = lines[len(lines)-8:]
			}
			amLogs = append(amLogs, fmt.Sprintf("\n    the last AM's log (%s on %s):\n      %s", at.ContainerID, at.NodeID, strings.Join(lines, "\n      ")))
		}
	}
	var cs []containerInfo
	if _, err := rn.cliJSON(readTimeout, rn.c.serverAddrs(), &cs, "container", "list", "-app", a.ID); err == nil {
		sort.Slice(cs, func(i, j int) bool { return cs[i].ID < cs[j].ID })
		for _, c := range cs {
			exit := "-"
			if c.ExitCode != nil {
				exit = fmt.Sprint(*c.ExitCode)
			}
			parts = append(parts, fmt.Sprintf("%s on %s %s %s exit=%s reason=%s %s", c.ID, c.NodeID, c.ExecutionType, c.State, exit, c.Reason, c.Diagnostics))
		}
	}
	rn.apps.mu.Lock()
	if s, ok := rn.apps.byName[a.Name]; ok {
		parts = append(parts, fmt.Sprintf("submitted in round %d at +%.1fs via %s", s.round, float64(s.res.start)/1e9, s.res.addrs))
	}
	rn.apps.mu.Unlock()
	return strings.Join(parts, "; ") + strings.Join(amLogs, "")
}

// checkDuplicates: a name the harness submitted once (names are unique)
// must belong to at most one app, and to exactly one if acknowledged.
func (rn *run) checkDuplicates(apps []appInfo, round int) (dups int) {
	byName := map[string][]appInfo{}
	for _, a := range apps {
		byName[a.Name] = append(byName[a.Name], a)
	}
	b := rn.apps
	b.mu.Lock()
	var subs []*submission
	for _, s := range b.subs {
		if s.round == round {
			subs = append(subs, s)
		}
	}
	b.mu.Unlock()
	for _, s := range subs {
		got := byName[s.name]
		if len(got) > 1 {
			dups++
			var ids []string
			for _, a := range got {
				ids = append(ids, fmt.Sprintf("%s (%s, submitted at %d)", a.ID, a.State, a.SubmittedAt))
			}
			rn.fail("no-duplicate-apps", "app name %s was submitted once (acked as %q: %s) but the servers hold %d apps with it: %s",
				s.name, s.appID, s.res.errLine(), len(got), strings.Join(ids, ", "))
		}
		if s.appID != "" && len(got) == 1 && got[0].ID != s.appID {
			rn.fail("no-duplicate-apps", "app name %s was acknowledged as %s but the servers hold it as %s", s.name, s.appID, got[0].ID)
		}
	}
	return dups
}
