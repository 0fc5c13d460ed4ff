package chaos

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Flags (after -args), each with an environment variable for its default.
var (
	flagRounds   = flag.Int("chaos.rounds", envInt("WEFT_CHAOS_ROUNDS", 0), "rounds of faults to run; 0 skips the suite (env WEFT_CHAOS_ROUNDS)")
	flagSeed     = flag.Uint64("chaos.seed", uint64(envInt("WEFT_CHAOS_SEED", 0)), "seed of the fault and load schedule; 0 picks one from the clock (env WEFT_CHAOS_SEED)")
	flagOnly     = flag.Int("chaos.only", envInt("WEFT_CHAOS_ONLY", 0), "replay only this round of the seed's schedule, -chaos.rounds times (env WEFT_CHAOS_ONLY)")
	flagFaults   = flag.String("chaos.faults", os.Getenv("WEFT_CHAOS_FAULTS"), "comma-separated fault kinds to draw from (default: all; env WEFT_CHAOS_FAULTS)")
	flagFailFast = flag.Bool("chaos.failfast", os.Getenv("WEFT_CHAOS_FAILFAST") != "", "stop after the first round with a violation (env WEFT_CHAOS_FAILFAST)")
	flagHold     = flag.Duration("chaos.hold", 0, "hold every fault this long instead of a drawn 3–15 s (env WEFT_CHAOS_HOLD)")
	flagAccept   = flag.Bool("chaos.acceptance", os.Getenv("WEFT_CHAOS_ACCEPTANCE") != "", "make round 1 SPEC §13's acceptance: the leader black-holed from both followers for 15 s (env WEFT_CHAOS_ACCEPTANCE)")
	flagKeep     = flag.Bool("chaos.keep", os.Getenv("WEFT_CHAOS_KEEP") != "", "keep the run directory even when the run passes (env WEFT_CHAOS_KEEP)")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// config is what a run was asked to do.
type config struct {
	rounds   int
	seed     uint64
	only     int
	kinds    []faultKind
	failFast bool
	keep     bool
	hold     time.Duration
	// acceptance makes round 1 SPEC §13's acceptance round; the seeded
	// schedule then starts at round 2.
	acceptance bool
}

// replay is the command that reruns this run's schedule.
func (c config) replay() string {
	var flags []string
	if c.acceptance {
		flags = append(flags, "-chaos.acceptance")
	}
	if len(c.kinds) != len(allKinds) {
		var ks []string
		for _, k := range c.kinds {
			ks = append(ks, string(k))
		}
		flags = append(flags, "-chaos.faults="+strings.Join(ks, ","))
	}
	if c.hold > 0 {
		flags = append(flags, "-chaos.hold="+c.hold.String())
	}
	if c.only > 0 {
		flags = append(flags, fmt.Sprintf("-chaos.only=%d", c.only))
	}
	cmd := fmt.Sprintf("make chaos ROUNDS=%d SEED=%d", c.rounds, c.seed)
	if len(flags) > 0 {
		cmd += fmt.Sprintf(" CHAOS_FLAGS='%s'", strings.Join(flags, " "))
	}
	return cmd
}

func TestChaos(t *testing.T) {
	if *flagRounds <= 0 {
		t.Skip("the chaos suite runs only when asked: make chaos / make chaos-short, or -chaos.rounds=N (env WEFT_CHAOS_ROUNDS); it needs root, ip and iptables")
	}
	if err := checkPrerequisites(); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	cfg := config{rounds: *flagRounds, seed: *flagSeed, only: *flagOnly, failFast: *flagFailFast, keep: *flagKeep, hold: *flagHold,
		acceptance: *flagAccept}
	if d, err := time.ParseDuration(os.Getenv("WEFT_CHAOS_HOLD")); err == nil && cfg.hold == 0 {
		cfg.hold = d
	}
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano()%1_000_000_000) + 1
	}
	kinds, err := parseKinds(*flagFaults)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	cfg.kinds = kinds

	rn := &run{t: t, cfg: cfg, start: time.Now()}
	defer rn.teardown()
	rn.catchSignals()
	if err := rn.setUp(); err != nil {
		rn.fail("set-up", "%v", err)
		return
	}
	rn.loop()
	rn.finalChecks()
	rn.summary()
	if n := rn.violationCount(); n > 0 {
		t.Errorf("chaos: %d violation(s) with seed %d; replay with: %s; logs of every process in %s",
			n, cfg.seed, cfg.replay(), rn.dir)
	}
}

// run is one run of the suite: its cluster, its history and what it found.
type run struct {
	t     *testing.T
	cfg   config
	start time.Time
	dir   string
	bin   string
	nw    *network
	c     *cluster
	log   io.Writer

	down     sync.Once
	stopMon  chan struct{}
	monitors sync.WaitGroup

	hist  *history
	apps  *appBook
	nodes *nodeWatch
	procs *procWatch
	terms *termWatch

	mu         sync.Mutex
	round      int // the round under way (0 before the first)
	violations []violation
	exits      []string
	aborted    string
	roundsRun  int
	stats      stats
}

// violation is one broken invariant, with its evidence.
type violation struct {
	round int
	check string
	at    int64 // ns since the run started
	msg   string
}

// now is the harness's clock for histories: ns since the run started
// (monotonic).
func (rn *run) now() int64 { return int64(time.Since(rn.start)) }

// logf prints a line to the terminal and the run's chaos.log.
func (rn *run) logf(format string, args ...any) {
	line := fmt.Sprintf("[chaos %7.1fs] ", time.Since(rn.start).Seconds()) + fmt.Sprintf(format, args...)
	if !strings.HasSuffix(line, "\n") {
		line += "\n"
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.log != nil {
		rn.log.Write([]byte(line))
	} else {
		os.Stdout.Write([]byte(line))
	}
}

// fail records a violation of check in the current round.
func (rn *run) fail(check, format string, args ...any) {
	rn.mu.Lock()
	v := violation{round: rn.round, check: check, at: rn.now(), msg: fmt.Sprintf(format, args...)}
	rn.violations = append(rn.violations, v)
	rn.mu.Unlock()
	rn.logf("VIOLATION [%s] round %d seed %d: %s", check, v.round, rn.cfg.seed, v.msg)
}

func (rn *run) currentRound() int {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.round
}

func (rn *run) violationCount() int {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return len(rn.violations)
}

// setUp cleans what dead runs left, picks a run number, builds weft, makes
// the network and starts the cluster.
func (rn *run) setUp() error {
	for _, c := range cleanStale() {
		fmt.Printf("chaos: cleaned up leftovers of an earlier run: %s\n", c)
	}
	n, lock, err := pickRun(int(rn.cfg.seed % 250))
	if err != nil {
		return err
	}
	rn.dir = filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-%s", prefix, n, time.Now().Format("20060102-150405")))
	if err := os.MkdirAll(rn.dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(rn.dir, "chaos.log"))
	if err != nil {
		return err
	}
	rn.mu.Lock()
	rn.log = io.MultiWriter(os.Stdout, f)
	rn.mu.Unlock()
	rn.logf("seed %d, %d round(s), run %d, run directory %s", rn.cfg.seed, rn.cfg.rounds, n, rn.dir)
	if err := rn.build(); err != nil {
		lock.Close()
		return err
	}
	var names []string
	names = append(names, serverNames...)
	names = append(names, agentNames...)
	rn.nw, err = setupNetwork(n, lock, names, hostOctet)
	if err != nil {
		return fmt.Errorf("network: %v", err)
	}
	rn.c, err = newCluster(rn.nw, rn.dir, rn.bin, rn.unexpectedExit)
	if err != nil {
		return err
	}
	rn.hist = newHistory()
	rn.apps = newAppBook()
	rn.nodes = newNodeWatch()
	rn.procs = newProcWatch(rn)
	rn.terms = newTermWatch()
	return rn.startCluster()
}

// build compiles weft once (or takes $WEFT_BINARY).
func (rn *run) build() error {
	if b := os.Getenv("WEFT_BINARY"); b != "" {
		rn.bin = b
		return nil
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	rn.bin = filepath.Join(rn.dir, "weft")
	out, err := exec.Command(gobin, "build", "-o", rn.bin, "../../cmd/weft").CombinedOutput()
	if err != nil {
		return fmt.Errorf("build weft: %v: %s", err, out)
	}
	return nil
}

// catchSignals tears down on Ctrl-C or SIGTERM before exiting.
func (rn *run) catchSignals() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-ch
		rn.logf("interrupted by %s: tearing down", sig)
		rn.mu.Lock()
		rn.aborted = "interrupted by " + sig.String()
		rn.mu.Unlock()
		rn.teardown()
		os.Exit(130)
	}()
}

// teardown stops everything and removes every object of the run; it keeps
// the run directory (logs, saved data dirs, histories) unless the run
// passed.
func (rn *run) teardown() {
	rn.down.Do(func() {
		if rn.stopMon != nil {
			close(rn.stopMon)
			rn.monitors.Wait()
		}
		rn.mu.Lock()
		aborted := rn.aborted != ""
		rn.mu.Unlock()
		failed := rn.t.Failed() || rn.violationCount() > 0 || aborted
		if rn.c != nil {
			rn.c.stopAll()
			if failed {
				rn.c.saveServerData()
			}
		}
		if rn.nw != nil {
			if errs := rn.nw.teardown(); len(errs) > 0 {
				fmt.Fprintf(os.Stderr, "chaos: teardown left something behind (the next run cleans it): %v\n", errs)
			}
		}
		if rn.dir == "" {
			return
		}
		if failed || rn.cfg.keep {
			fmt.Printf("chaos: run directory kept: %s (chaos.log, every process's log, the servers' data dirs, histories)\n", rn.dir)
		} else {
			os.RemoveAll(rn.dir)
		}
	})
}

// unexpectedExit is called when a weft process exits without the harness
// having killed it.
func (rn *run) unexpectedExit(p *process, err error) {
	msg := fmt.Sprintf("%s (pid %d) exited by itself: %v; last lines of %s:\n%s", p.name, p.pid(), err, p.logPath, tailFile(p.logPath, 12))
	rn.mu.Lock()
	rn.exits = append(rn.exits, msg)
	rn.mu.Unlock()
	rn.fail("process-exit", "%s", msg)
}

// tailFile returns the last n lines of a file, indented.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
