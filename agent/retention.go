package agent

import (
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	wrpc "github.com/weft-sched/weft/rpc"
)

// logRetention removes completed containers' directories, their logs and
// any output included, once log_retention has passed since each completed
// and its app has ended (SPEC §20, §19: a MapReduce job's reduces fetch
// map output from them while the job runs), so that an agent's disk does
// not fill with the files of apps long gone.
//
// A directory past its retention waits for its app's end: the agent asks
// the servers which of the waiting apps still run with its heartbeats
// (appsToCheck, checked). An app they do not say is running has ended (or
// is unknown) and its directories go at once; one they have not answered
// for within a retention (the servers cannot be reached) goes too, so the
// disk stays bounded.
//
// It holds only directories and times: when a container completed is
// recorded by the manager on the agent's clock, and sweep is driven by
// that clock, so a test moves a fake clock instead of waiting.
type logRetention struct {
	logger hclog.Logger
	after  time.Duration
	root   string // <data-dir>/containers: nothing outside it is removed

	mu      sync.Mutex
	due     map[string]int64        // container directory → Unix ns its retention ends
	waiting map[string]*retainedApp // app ID → its directories past their retention
}

// retainedApp is an app whose directories are past their retention.
type retainedApp struct {
	dirs []string
	// since is when the app was last known to run (or its first directory
	// began to wait); asked when the servers were last asked about it.
	since, asked int64
}

// maxAppsToCheck bounds the apps one heartbeat asks about (the servers
// refuse more: rpc.MaxAppsToCheck).
const maxAppsToCheck = wrpc.MaxAppsToCheck

func newLogRetention(logger hclog.Logger, root string, after time.Duration) *logRetention {
	return &logRetention{logger: logger.Named("log_retention"), after: after, root: root,
		due: map[string]int64{}, waiting: map[string]*retainedApp{}}
}

// completed records that the container in dir completed at (Unix ns).
func (r *logRetention) completed(dir string, at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.due[dir] = at + int64(r.after)
}

// adoptLeftovers takes in the container directories a previous run of the
// agent left (their containers are stopped by then): when they completed
// is unknown, so each is kept a full retention from now.
func (r *logRetention) adoptLeftovers(now time.Time) int {
	dirs, _ := filepath.Glob(filepath.Join(r.root, "*", "*"))
	n := 0
	for _, d := range dirs {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			r.completed(d, now.UnixNano())
			n++
		}
	}
	return n
}

// sweep sets the directories whose retention has ended by now waiting
// for their apps' ends, and removes those of apps the servers have not
// said are running for a whole retention; it returns how many it removed.
func (r *logRetention) sweep(now time.Time) int {
	t := now.UnixNano()
	r.mu.Lock()
	for dir, at := range r.due {
		if at > t {
			continue
		}
		delete(r.due, dir)
		app := filepath.Base(filepath.Dir(dir))
		w := r.waiting[app]
		if w == nil {
			w = &retainedApp{since: t}
			r.waiting[app] = w
		}
		w.dirs = append(w.dirs, dir)
	}
	var gone []string
	for app, w := range r.waiting {
		if t-w.since >= int64(r.after) {
			gone = append(gone, w.dirs...)
			delete(r.waiting, app)
		}
	}
	r.mu.Unlock()
	return r.remove(gone, "no server said whether their apps still run")
}

// appsToCheck returns the waiting apps to ask the servers about now (at
// most maxAppsToCheck, each at most once a sweep interval), and marks them
// asked.
func (r *logRetention) appsToCheck(now time.Time) []string {
	t := now.UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	var apps []string
	for app, w := range r.waiting {
		if len(apps) == maxAppsToCheck {
			break
		}
		if t-w.asked >= int64(r.sweepInterval()) {
			w.asked = t
			apps = append(apps, app)
		}
	}
	sort.Strings(apps)
	return apps
}

// checked takes the servers' answer about asked: the apps in running still
// run, and their directories wait on; the rest have ended, and theirs are
// removed. It returns how many it removed.
func (r *logRetention) checked(asked, running []string, now time.Time) int {
	still := make(map[string]bool, len(running))
	for _, app := range running {
		still[app] = true
	}
	var gone []string
	r.mu.Lock()
	for _, app := range asked {
		w := r.waiting[app]
		switch {
		case w == nil:
		case still[app]:
			w.since = now.UnixNano()
		default:
			gone = append(gone, w.dirs...)
			delete(r.waiting, app)
		}
	}
	r.mu.Unlock()
	return r.remove(gone, "their apps have ended")
}

// remove removes the container directories dirs, and their app's
// directory once it is empty; it returns how many it removed.
func (r *logRetention) remove(dirs []string, why string) int {
	sort.Strings(dirs)
	removed := 0
	for _, dir := range dirs {
		if rel, err := filepath.Rel(r.root, dir); err != nil || !filepath.IsLocal(rel) {
			continue // never outside the containers directory
		}
		if err := os.RemoveAll(dir); err != nil {
			r.logger.Warn("cannot remove a completed container's directory", "dir", dir, "error", err)
			continue
		}
		os.Remove(filepath.Dir(dir)) // the app's directory, if that was its last container
		removed++
	}
	if removed > 0 {
		r.logger.Debug("removed completed containers' directories", "count", removed, "log_retention", r.after, "why", why)
	}
	return removed
}

// sweepInterval is how often the agent sweeps: a tenth of the retention,
// between a second and a minute.
func (r *logRetention) sweepInterval() time.Duration {
	return min(max(r.after/10, time.Second), time.Minute)
}

// retentionLoop sweeps on the agent's clock until the agent shuts down.
func (a *Agent) retentionLoop() {
	tick := a.clock.NewTicker(a.retention.sweepInterval())
	defer tick.Stop()
	for {
		select {
		case <-tick.C():
			// The clock's time, not the tick's: a tick may wait in the
			// channel while later ones are dropped.
			a.retention.sweep(a.clock.Now())
		case <-a.ctx.Done():
			return
		}
	}
}
